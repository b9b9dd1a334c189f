import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers.js';

const run = promisify(execFile);
const EXAMPLE = fileURLToPath(new URL('../examples/library.mjs', import.meta.url));

describe('the README library example', () => {
  it('runs as written, against the built package, and exits by itself', async () => {
    const workspace = tempDir('cohort-example-');
    writeFileSync(path.join(workspace, 'README.md'), '# Example\n\nA workspace.\n');
    writeFileSync(path.join(workspace, 'package.json'), '{"name":"example"}\n');
    const env = { ...process.env };
    delete env.ANTHROPIC_API_KEY;
    delete env.ANTHROPIC_BASE_URL;
    const { stdout } = await run(process.execPath, [EXAMPLE], {
      cwd: workspace,
      env,
      timeout: 60_000,
    });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^complete README\.md: 3 lines/);
    expect(lines[1]).toMatch(/^ag_[a-z2-7]{12} (queued|running) complete$/);
    expect(lines).toContain('settled README.md');
    expect(lines).toContain('settled package.json');
    expect(lines.at(-1)).toBe('ready 2');
  });
});
