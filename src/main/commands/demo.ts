import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { glob } from 'tinyglobby';
import { COMMON_OPTIONS, parseCommand, stringFlag } from '../cli-options.js';
import { Engine } from '../engine.js';
import { selectProvider } from '../provider-select.js';
import { engineOptionsFrom } from './common.js';

/**
 * Interim demo: fans out one child per file of a folder (default: this project's src/) on the
 * worker pool and prints each child's digest as it settles. The parent-session demo replaces it.
 */
export async function demoCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, {
    ...COMMON_OPTIONS,
    folder: { type: 'string' },
  });
  const folder = path.resolve(positionals[0] ?? stringFlag(values, 'folder') ?? defaultFolder());
  const provider = await selectProvider(values);
  const engine = await Engine.start({
    ...engineOptionsFrom(values, provider.config),
    workspace: folder,
  });
  try {
    const files = (await glob('**/*.ts', { cwd: folder })).sort();
    process.stdout.write(`cohort demo: ${files.length} files in ${folder}, one child agent each\n`);
    let done = 0;
    const results = await Promise.all(
      files.map(async (file) => {
        const result = await engine.run({
          title: file,
          prompt: `Read the file \`${file}\` with read_file and reply with a short digest of it.`,
        });
        done++;
        process.stdout.write(`[${done}/${files.length}] ${result.outcome.padEnd(9)} ${file}\n`);
        return result;
      }),
    );
    process.stdout.write('\n# Report\n');
    for (const result of results)
      process.stdout.write(`\n## ${result.title}\n${result.text || `(${result.outcome})`}\n`);
    process.stdout.write(`\nlogs: ${engine.logDir}\n`);
    return results.every((result) => result.outcome === 'complete') ? 0 : 1;
  } finally {
    await engine.close();
    await provider.close();
  }
}

function defaultFolder(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../src');
}
