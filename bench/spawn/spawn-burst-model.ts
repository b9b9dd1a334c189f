/**
 * The scripted model for `spawn-burst.ts`, in a process of its own so that its CPU is not the
 * measured process's. Forked with an IPC channel: it sends `{url}` once listening, answers
 * `'stats'` with `{stats}` (requests received so far), and exits when the channel closes.
 */
import { startScriptedModel } from '../../src/testing/index.js';

const model = await startScriptedModel({ port: 0 });
process.send?.({ url: model.url });
process.on('message', (message) => {
  if (message === 'stats') process.send?.({ stats: model.stats });
});
process.on('disconnect', () => {
  void model.close().then(() => process.exit(0));
});
