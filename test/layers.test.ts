import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The layers are enforced by the linter, not by convention: the repository's own biome.json,
 * run over probe files laid out like src/, refuses each import across a layer and lets the
 * allowed ones through. (Probes go to a temporary copy so the suite never writes into src/.)
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIOME = path.join(ROOT, 'node_modules', '.bin', 'biome');

const PROBES: { file: string; imports: string; refused: boolean }[] = [
  { file: 'src/main/probe.ts', imports: '../cli/flags.js', refused: true },
  { file: 'src/main/runners/probe.ts', imports: '../../cli/commands/start.js', refused: true },
  { file: 'src/main/probe-bench.ts', imports: '../../bench/run.js', refused: true },
  { file: 'src/index.ts', imports: './cli/cli.js', refused: true },
  { file: 'src/shared/probe.ts', imports: '../main/engine.js', refused: true },
  { file: 'src/shared/loop/probe.ts', imports: '../../worker/uplink.js', refused: true },
  { file: 'src/shared/probe-cli.ts', imports: '../cli/output.js', refused: true },
  { file: 'src/worker/probe.ts', imports: '../main/engine.js', refused: true },
  { file: 'src/worker/probe-cli.ts', imports: '../cli/flags.js', refused: true },
  { file: 'src/testing/probe.ts', imports: '../main/engine.js', refused: true },
  { file: 'src/main/probe-ok.ts', imports: '../shared/ids.js', refused: false },
  { file: 'src/worker/probe-ok.ts', imports: '../shared/protocol.js', refused: false },
  { file: 'src/cli/probe-ok.ts', imports: '../main/engine.js', refused: false },
];

interface Report {
  diagnostics: { category: string; location: { path: string } }[];
}

describe('import layers', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cohort-layers-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('biome.json refuses each import across a layer and allows the rest', () => {
    copyFileSync(path.join(ROOT, 'biome.json'), path.join(dir, 'biome.json'));
    for (const probe of PROBES) {
      mkdirSync(path.join(dir, path.dirname(probe.file)), { recursive: true });
      writeFileSync(path.join(dir, probe.file), `import '${probe.imports}';\n`);
    }
    const run = spawnSync(BIOME, ['lint', '--vcs-enabled=false', '--reporter=json', 'src'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const report = JSON.parse(run.stdout) as Report;
    const refused = new Set(
      report.diagnostics
        .filter((diagnostic) => diagnostic.category === 'lint/style/noRestrictedImports')
        .map((diagnostic) => diagnostic.location.path),
    );
    for (const probe of PROBES) {
      expect({ file: probe.file, refused: refused.has(probe.file) }).toEqual({
        file: probe.file,
        refused: probe.refused,
      });
    }
    expect(run.status).not.toBe(0);
  });
});
