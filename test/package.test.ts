/**
 * What the package ships and what importing it loads. `npm pack --dry-run` gives the files the
 * registry would get: the library, its CLI and docs, never the bench, chaos or tests. A copy of
 * exactly those files runs the CLI. And importing the library, in a fresh process that records
 * every module it resolves, loads neither the queue's packages nor the OpenTelemetry SDK: they
 * load with `import()` only when queue mode or the CLI's tracing is used (docs/DEPENDENCIES.md).
 * Nor does it load a devDependency, such as the libraries the bench compares cohort with.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PACKAGE = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  bin: Record<string, string>;
  exports: Record<string, { import: string; types: string }>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const run = promisify(execFile);

/** Runs `node args` from the repository root; resolves with its exit code and output. */
async function node(
  args: string[],
  cwd = ROOT,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, args, { cwd });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('the package', () => {
  let files: string[];

  beforeAll(async () => {
    // --ignore-scripts: prepack would rebuild dist/ under the other test files' feet.
    const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: ROOT,
    });
    files = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]!.files.map(
      (file) => file.path,
    );
  }, 60_000);

  it('ships the library, its CLI and docs, and no bench, chaos or test file', () => {
    for (const entry of Object.values(PACKAGE.exports)) {
      expect(files).toContain(path.normalize(entry.import));
      expect(files).toContain(path.normalize(entry.types));
    }
    for (const bin of Object.values(PACKAGE.bin)) expect(files).toContain(path.normalize(bin));
    expect(files).toContain('dist/src/worker/entry.cjs');
    expect(files).toContain('README.md');
    const code = files.filter((file) => /\.(ts|js|cjs|mjs|map)$/.test(file));
    expect(code.length).toBeGreaterThan(100);
    for (const file of code) expect(file).toMatch(/^(dist\/)?src\//);
    for (const file of files) expect(file).not.toMatch(/^(dist\/)?(bench|chaos|test)\//);
  });

  describe('a copy of the shipped files alone', () => {
    let copy: string;

    beforeAll(() => {
      copy = mkdtempSync(path.join(os.tmpdir(), 'cohort-package-'));
      for (const file of files) cpSync(path.join(ROOT, file), path.join(copy, file));
      cpSync(path.join(ROOT, 'package.json'), path.join(copy, 'package.json'));
      // The dependencies an install would bring: the repository's own.
      symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'), 'dir');
    });
    afterAll(() => rmSync(copy, { recursive: true, force: true }));

    it('runs the cohort bin: usage and version', async () => {
      const bin = path.join(copy, PACKAGE.bin.cohort!);
      const help = await node([bin, '--help'], copy);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(/^Usage: cohort COMMAND/);
      const version = await node([bin, '--version'], copy);
      expect(version.stdout.trim()).toBe(
        (JSON.parse(readFileSync(path.join(copy, 'package.json'), 'utf8')) as { version: string })
          .version,
      );
    });

    it('answers cohort bench with where the bench runs, exit 2', async () => {
      const result = await node([path.join(copy, PACKAGE.bin.cohort!), 'bench', '--help'], copy);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('the package ships without it');
      expect(result.stderr).toContain('npm run bench');
      expect(result.stdout).toBe('');
    });
  });
});

/**
 * Module hooks, run on the loader's thread: every resolved URL goes to the main thread over the
 * port; a message on the port is answered after every URL sent before it, so the main thread
 * knows it has them all.
 */
const HOOKS = `
let port;
export function initialize(data) {
  port = data.port;
  port.on('message', () => port.postMessage({ flushed: true }));
  port.unref();
}
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  port.postMessage({ url: result.url });
  return result;
}`;

/** Imports each of `argv` in turn and prints every URL the loader resolved, as JSON. */
const RECORDER = `
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
const { port1, port2 } = new MessageChannel();
const urls = [];
let flushed;
const done = new Promise((resolve) => { flushed = resolve; });
port1.on('message', (message) => (message.flushed ? flushed() : urls.push(message.url)));
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOKS)}), {
  data: { port: port2 },
  transferList: [port2],
});
for (const target of process.argv.slice(1)) await import(target);
port1.postMessage('flush');
await done;
port1.close();
process.stdout.write(JSON.stringify(urls));
`;

/** The packages (by name) whose modules a fresh process resolved while importing `targets`. */
async function packagesLoadedBy(targets: string[]): Promise<Set<string>> {
  const result = await node(['--input-type=module', '-e', RECORDER, ...targets]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const names = new Set<string>();
  for (const url of JSON.parse(result.stdout) as string[]) {
    const marker = url.lastIndexOf('/node_modules/');
    if (marker < 0) continue;
    const [first, second] = url.slice(marker + '/node_modules/'.length).split('/');
    names.add(first!.startsWith('@') ? `${first}/${second}` : first!);
  }
  return names;
}

/** Queue mode's packages and the OpenTelemetry SDK: every such dependency but the API. */
const LAZY = Object.keys(PACKAGE.dependencies).filter(
  (name) =>
    name === 'bullmq' ||
    name === 'ioredis' ||
    (name.startsWith('@opentelemetry/') && name !== '@opentelemetry/api'),
);

describe('the library import graph', () => {
  it('lists the packages that must load only when used', () => {
    expect(LAZY).toEqual(expect.arrayContaining(['bullmq', 'ioredis', '@opentelemetry/sdk-trace']));
    expect(LAZY.length).toBeGreaterThanOrEqual(6);
  });

  it('importing the library, its testing entry or its worker loads no queue or SDK package', async () => {
    const entries = [
      ...Object.values(PACKAGE.exports).map((entry) => entry.import),
      'dist/src/worker/child-task.js',
    ].map((file) => path.join(ROOT, file));
    const loaded = await packagesLoadedBy(entries.map((file) => pathToFileURL(file).href));
    // The recorder sees the library's own dependencies, reached through its modules.
    for (const used of ['@opentelemetry/api', 'piscina', 'undici', '@anthropic-ai/sdk']) {
      expect(loaded).toContain(used);
    }
    // The MCP client too (its root entry does not import on its own, so it is not in LAZY).
    expect(loaded).not.toContain('@modelcontextprotocol/sdk');
    for (const name of loaded) {
      expect(LAZY).not.toContain(name);
      expect(name === '@opentelemetry/api' || !name.startsWith('@opentelemetry/')).toBe(true);
      // The bench's libraries (the AI SDK, LangChain) and every other dev tool stay outside.
      expect(Object.keys(PACKAGE.devDependencies), name).not.toContain(name);
    }
  }, 30_000);

  it('sees those packages when they are imported', async () => {
    const loaded = await packagesLoadedBy(LAZY);
    for (const name of LAZY) expect(loaded).toContain(name);
  }, 30_000);
});
