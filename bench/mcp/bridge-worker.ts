/**
 * A worker thread of the MCP bench: calls host tools over a host bridge (the `port` it is given),
 * one after another, and posts each tool's call times back. What an agent's call pays, without
 * the agent around it.
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { HostConnection } from '../../src/worker/bridge-client.js';

const { port, count, tools } = workerData as {
  port: MessagePort;
  count: number;
  tools: { name: string; input: unknown }[];
};
const host = new HostConnection(port);
const signal = new AbortController().signal;
const times: Record<string, number[]> = {};
for (const { name, input } of tools) {
  const own: number[] = [];
  for (let index = 0; index < count; index++) {
    const start = performance.now();
    const outcome = await host.call('callTool', { name, input }, signal);
    own.push(performance.now() - start);
    if (!outcome.ok) throw new Error(`${name}: ${outcome.error}`);
  }
  times[name] = own;
}
parentPort?.postMessage(times);
host.close();
