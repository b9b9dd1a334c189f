import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, type EngineOptions } from '../src/main/engine.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import {
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptStep,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';

export const TEST_TOOLS = fileURLToPath(new URL('./fixtures/test-tools.mjs', import.meta.url));

export function tempDir(prefix = 'cohort-test-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A prompt that carries a script for the agent that receives it. */
export function scripted(steps: ScriptStep[], lead = 'Scripted task.'): string {
  return `${lead}\n\n${scriptBlock({ steps })}`;
}

/** A small workspace folder with a few files. */
export function makeWorkspace(): string {
  const root = tempDir('cohort-ws-');
  writeFileSync(path.join(root, 'alpha.ts'), 'export function alpha() {\n  return 1;\n}\n');
  writeFileSync(path.join(root, 'beta.md'), '# Beta\n\nSome notes.\n');
  return root;
}

export interface Rig {
  model: ScriptedModel;
  engine: Engine;
  logDir: string;
  close(): Promise<void>;
}

/** The scripted model on real HTTP and a real engine with real workers, wired together. */
export async function startRig(
  options: EngineOptions = {},
  modelOptions: ScriptedModelOptions = {},
): Promise<Rig> {
  const model = await startScriptedModel({ port: 0, ...modelOptions });
  const logDir = tempDir('cohort-logs-');
  const engine = await Engine.start({
    threads: 2,
    logDir,
    toolModules: [TEST_TOOLS],
    ...options,
    provider: {
      baseURL: model.url,
      model: 'cohort-scripted',
      maxRetries: 2,
      backoffBaseMs: 5,
      backoffMaxMs: 50,
      ...options.provider,
    },
  });
  return {
    model,
    engine,
    logDir,
    close: async () => {
      await engine.close();
      await model.close();
    },
  };
}

export function readTranscript(logDir: string): MessageParam[] {
  return readFileSync(path.join(logDir, 'transcript.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as MessageParam);
}

/** Every tool_use in a transcript is answered by exactly one tool_result in the next message. */
export function assertToolUsesAnswered(messages: MessageParam[]): void {
  messages.forEach((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return;
    const uses = message.content
      .filter((block) => block.type === 'tool_use')
      .map((block) => block.id);
    if (uses.length === 0) return;
    const next = messages[index + 1];
    if (!next || typeof next.content === 'string')
      throw new Error(`tool_use at message ${index} unanswered`);
    const answered = next.content.flatMap((block) =>
      block.type === 'tool_result' ? [block.tool_use_id] : [],
    );
    if (JSON.stringify(answered) !== JSON.stringify(uses)) {
      throw new Error(
        `message ${index}: tool_use ${uses.join(',')} answered by ${answered.join(',')}`,
      );
    }
  });
}

/** Resolves with the first event for which `match` holds. */
export function nextEvent<T>(
  emitter: {
    once(event: string, listener: (value: T) => void): unknown;
    on(event: string, listener: (value: T) => void): unknown;
    off(event: string, listener: (value: T) => void): unknown;
  },
  name: string,
  match: (value: T) => boolean = () => true,
): Promise<T> {
  return new Promise((resolve) => {
    const listener = (value: T) => {
      if (!match(value)) return;
      emitter.off(name, listener);
      resolve(value);
    };
    emitter.on(name, listener);
  });
}
