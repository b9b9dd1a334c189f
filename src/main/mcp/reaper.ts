/**
 * The stdio servers' processes of this process, ended when it exits by any path. `close` ends
 * them in order; this is for the paths that never reach it: `process.exit` (the CLI forced out
 * by a signal) and a crash. An `exit` listener may only do synchronous work, so each gets SIGTERM
 * (its process group: it leads one of its own) and is not waited for. (A SIGKILL of this process
 * runs nothing: the servers then see their stdin close.)
 */
import { signalServer } from './stdio-transport.js';

const live = new Set<number>();
let listening = false;

function endAll(): void {
  for (const pid of live) {
    signalServer(pid, 'SIGTERM');
  }
}

/** A server process started: it is ended with this process unless `release`d first. */
export function trackProcess(pid: number): void {
  live.add(pid);
  if (!listening) {
    listening = true;
    process.on('exit', endAll);
  }
}

/** A server process was closed, or died. */
export function releaseProcess(pid: number): void {
  live.delete(pid);
}
