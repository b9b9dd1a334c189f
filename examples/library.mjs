// The README's library example, runnable: `npm run build && node examples/library.mjs`.
import { Engine, Session } from 'cohort-agents';
import { startScriptedModel } from 'cohort-agents/testing';

const model = await startScriptedModel(); // or omit it and set ANTHROPIC_API_KEY
const engine = await Engine.start({
  provider: { baseURL: model.url, model: 'any' },
  workspace: '.', // the root of read_file / list_files
});

// One child, awaited.
const result = await engine.run({ prompt: 'Read `README.md` with read_file and digest it.' });
console.log(result.outcome, result.text);

// A handle: id, status, result promise, cancel.
const handle = engine.spawn({
  prompt: 'Read `package.json` with read_file and digest it.',
  signal: AbortSignal.timeout(60_000),
});
console.log(handle.id, handle.status, (await handle.result).outcome);

// A parent session with live events.
const session = new Session(engine, { autoWake: true });
const events = (async () => {
  for await (const event of session.events()) {
    if (event.type === 'agent-settle') console.log('settled', event.result.title);
  }
})();
const turn = await session.send(
  'Survey the workspace: one async sub-agent per file, then a report.',
);
await session.waitIdle(); // no live async agent, empty inbox
console.log(turn.outcome, session.delivered.length);
await session.close();
await events;
await engine.close(); // cancels what is left; the process exits by itself
await model.close();
