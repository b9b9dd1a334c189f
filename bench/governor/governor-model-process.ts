/**
 * Entry of the `governor` part's model process: the scripted model, in a process of its own so
 * its CPU is not the measured process's, plus a record of what it admitted and when. The
 * `request` event fires exactly for a request that passed the rate limits, and the 429 count is
 * polled, so nothing in src/testing had to change for the bench to see the server's side.
 *
 * Protocol (IPC): it takes one ScriptedModelOptions, answers `{type: 'listening', url}`; then
 * `{type: 'report'}` answers `{type: 'report', report}`. It closes the model and exits when the
 * channel disconnects.
 */
import { type ScriptedModelOptions, startScriptedModel } from '../../src/testing/index.js';
import type { ModelReport } from './governor-jobs.js';

/** How often the 429 count is read: fine enough for one-second bins. */
const POLL_MS = 100;

async function serve(options: ScriptedModelOptions): Promise<void> {
  const model = await startScriptedModel(options);
  const admissions: ModelReport['admissions'] = [];
  const refusals: ModelReport['refusals'] = [];
  model.on('request', (event: { turn: number }) => {
    admissions.push([Date.now(), event.turn]);
  });
  let counted = 0;
  const poll = (): void => {
    const total = model.stats.rateLimited429;
    if (total === counted) return;
    refusals.push([Date.now(), total - counted]);
    counted = total;
  };
  const poller = setInterval(poll, POLL_MS);
  process.on('message', (message: { type?: string }) => {
    if (message.type !== 'report') return;
    poll();
    const report: ModelReport = { admissions, refusals, stats: { ...model.stats } };
    process.send?.({ type: 'report', report });
  });
  process.once('disconnect', () => {
    clearInterval(poller);
    void model.close();
  });
  process.send?.({ type: 'listening', url: model.url });
}

process.once('message', (options: ScriptedModelOptions) => {
  serve(options).catch((error: unknown) => {
    process.stderr.write(`governor model process: ${String(error)}\n`);
    process.exit(1);
  });
});
