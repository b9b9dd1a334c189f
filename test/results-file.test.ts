import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { type BatchResultLine, openResults } from '../src/cli/results/file.js';
import { UsageError } from '../src/shared/errors.js';
import { emptyUsage } from '../src/shared/result.js';
import { tempDir } from './helpers.js';

/** The built module: the lock's other holder is a separate node process importing it. */
const BUILT = pathToFileURL(
  fileURLToPath(new URL('../dist/src/cli/results/file.js', import.meta.url)),
).href;

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/** A result line as batch writes it: the AgentResult (id first) plus `taskId`. */
function line(taskId: string, outcome: string, reason?: string): string {
  return JSON.stringify({
    id: `agent-${taskId}`,
    taskId,
    outcome,
    ...(reason === undefined ? {} : { reason }),
  });
}

function result(taskId: string, outcome: BatchResultLine['outcome']): BatchResultLine {
  return {
    id: `agent-${taskId}`,
    taskId,
    title: taskId,
    outcome,
    text: outcome === 'complete' ? 'done' : '',
    truncated: false,
    elapsedMs: 1,
    generation: 0,
    usage: emptyUsage(),
  };
}

function taskIds(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((text) => text !== '')
    .map((text) => (JSON.parse(text) as { taskId: string }).taskId);
}

/** Runs `fn`, expecting a UsageError; returns its message. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error('expected a UsageError, got none');
}

interface Child {
  child: ChildProcess;
  /** Resolves with the first stdout line. */
  firstLine: Promise<string>;
  /** Resolves with stdout line `index` (from 0). */
  line(index: number): Promise<string>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A node process running `body` with `openResults` imported and `file` as `FILE`. */
function nodeChild(file: string, body: string): Child {
  const code = `import { openResults } from ${JSON.stringify(BUILT)};\nconst FILE = process.argv[1];\n${body}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code, file], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiters = new Map<number, (text: string) => void>();
  const check = () => {
    const lines = out.split('\n').slice(0, -1);
    for (const [index, resolve] of waiters) {
      if (index < lines.length) {
        waiters.delete(index);
        resolve(lines[index]!);
      }
    }
  };
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    check();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const line = (index: number) =>
    new Promise<string>((resolve, reject) => {
      waiters.set(index, resolve);
      check();
      child.on('close', () =>
        reject(new Error(`child ended before line ${index}; stderr: ${err}`)),
      );
    });
  const firstLine = line(0);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { child, firstLine, line, exit };
}

/** Holds the lock on `file` until its stdin closes; says `locked` once it holds it. */
function holder(file: string): Child {
  return nodeChild(
    file,
    `const results = openResults(FILE);
process.stdout.write('locked\\n');
process.stdin.on('end', () => results.close());
process.stdin.resume();`,
  );
}

/** A pid that belonged to a process that has exited (and been reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  const pid = child.pid!;
  await new Promise((resolve) => child.on('close', resolve));
  return pid;
}

describe('the results lock', () => {
  it('a second process holding the lock makes openResults refuse, naming its pid, host and the lock file', async () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(file, `${line('a', 'complete')}\n`);
    const other = holder(file);
    expect(await other.firstLine).toBe('locked');
    const message = refusal(() => openResults(file));
    expect(message).toContain(`pid ${other.child.pid} on host ${hostname()}`);
    expect(message).toContain(`${file}.lock`);
    other.child.stdin!.end();
    expect((await other.exit).code).toBe(0);
    // Released by close(): this run now gets it.
    expect(existsSync(`${file}.lock`)).toBe(false);
    openResults(file).close();
  });

  it('two names for one file (a symbolic link) share one lock', async () => {
    const folder = tempDir();
    const file = path.join(folder, 'results.jsonl');
    writeFileSync(file, '');
    const link = path.join(folder, 'link.jsonl');
    symlinkSync(file, link);
    const other = holder(file);
    await other.firstLine;
    expect(refusal(() => openResults(link))).toContain(`pid ${other.child.pid}`);
    other.child.stdin!.end();
    await other.exit;
  });

  it('a lock left by a killed process (dead pid) is taken over', async () => {
    const file = path.join(tempDir(), 'results.jsonl');
    const other = holder(file);
    await other.firstLine;
    other.child.kill('SIGKILL');
    expect((await other.exit).signal).toBe('SIGKILL');
    const left = JSON.parse(readFileSync(`${file}.lock`, 'utf8')) as { pid: number };
    expect(left.pid).toBe(other.child.pid);
    const results = openResults(file);
    const taken = JSON.parse(readFileSync(`${file}.lock`, 'utf8')) as { pid: number; host: string };
    expect(taken).toMatchObject({ pid: process.pid, host: hostname() });
    results.close();
    expect(existsSync(`${file}.lock`)).toBe(false);
  });

  it('a lock whose holder is a zombie (killed, not yet reaped) is taken over', async () => {
    // `sh` starts `sleep 0` in the background and becomes `sleep 5`, which never reaps it: the
    // finished `sleep 0` stays a zombie, its pid still answering kill(pid, 0).
    const shell = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 5']);
    try {
      const zombie = await new Promise<number>((resolve) =>
        shell.stdout.once('data', (chunk: Buffer) => resolve(Number(String(chunk).trim()))),
      );
      // Not vi.waitFor's default second: on a loaded machine `sleep 0` may take longer to end.
      await vi.waitFor(
        () => {
          const stat = readFileSync(`/proc/${zombie}/stat`, 'utf8');
          expect(stat.slice(stat.lastIndexOf(')') + 2)[0]).toBe('Z');
        },
        { timeout: 10_000 },
      );
      const file = path.join(tempDir(), 'results.jsonl');
      const left = { pid: zombie, host: hostname(), startedAt: new Date().toISOString() };
      writeFileSync(`${file}.lock`, `${JSON.stringify(left)}\n`);
      const results = openResults(file);
      const taken = JSON.parse(readFileSync(`${file}.lock`, 'utf8')) as { pid: number };
      expect(taken.pid).toBe(process.pid);
      results.close();
    } finally {
      shell.kill('SIGKILL');
    }
  });

  it('of several processes racing to take over one stale lock, exactly one wins (round after round)', async () => {
    const folder = tempDir();
    const file = path.join(folder, 'results.jsonl');
    const stale = `${JSON.stringify({ pid: await deadPid(), host: hostname(), startedAt: new Date().toISOString() })}\n`;
    // A racer told `arm FIFO` opens the FIFO, says `armed` and blocks reading it; when the test
    // closes its end, every racer wakes at once and tries. `release` closes the winner's file.
    const racers = Array.from({ length: 4 }, () =>
      nodeChild(
        file,
        `import { openSync, readSync, closeSync } from 'node:fs';
let results;
process.stdout.write('ready\\n');
process.stdin.setEncoding('utf8').on('data', (text) => {
  for (const command of text.split('\\n').filter(Boolean)) {
    if (command === 'release') {
      results.close();
      process.stdout.write('released\\n');
      continue;
    }
    const fd = openSync(command.slice(4), 'r');
    process.stdout.write('armed\\n');
    readSync(fd, Buffer.alloc(1));
    closeSync(fd);
    try {
      results = openResults(FILE);
      process.stdout.write('won\\n');
    } catch (error) {
      process.stdout.write(JSON.stringify(error.message) + '\\n');
    }
  }
});`,
      ),
    );
    await Promise.all(racers.map((racer) => racer.firstLine));
    const next = racers.map(() => 1);
    const read = (index: number) => racers[index]!.line(next[index]!++);
    for (let round = 0; round < 8; round++) {
      writeFileSync(`${file}.lock`, stale);
      const fifo = path.join(folder, `go-${round}`);
      execFileSync('mkfifo', [fifo]);
      // Read-write, so this open does not wait for a reader, and the racers' opens do not wait.
      const gate = openSync(fifo, constants.O_RDWR);
      for (const racer of racers) racer.child.stdin!.write(`arm ${fifo}\n`);
      expect(await Promise.all(racers.map((_, index) => read(index)))).toEqual(
        racers.map(() => 'armed'),
      );
      closeSync(gate);
      const outcomes = await Promise.all(racers.map((_, index) => read(index)));
      const winners = outcomes.flatMap((outcome, index) => (outcome === 'won' ? [index] : []));
      expect(winners).toHaveLength(1);
      const winner = winners[0]!;
      for (const outcome of outcomes.filter((outcome) => outcome !== 'won')) {
        expect(JSON.parse(outcome)).toContain(`pid ${racers[winner]!.child.pid}`);
      }
      racers[winner]!.child.stdin!.write('release\n');
      expect(await read(winner)).toBe('released');
      expect(existsSync(`${file}.lock`)).toBe(false);
      expect(existsSync(`${file}.lock.takeover`)).toBe(false);
    }
    for (const racer of racers) racer.child.stdin!.end();
    await Promise.all(racers.map((racer) => racer.exit));
  });

  it('a lock from another host is never taken over, and the message says how to remove it', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    const foreign = `${JSON.stringify({ pid: 4_000_000, host: 'elsewhere.example', startedAt: '2024-01-01T00:00:00.000Z' })}\n`;
    writeFileSync(`${file}.lock`, foreign);
    const message = refusal(() => openResults(file));
    expect(message).toContain('pid 4000000 on host elsewhere.example');
    expect(message).toMatch(/never taken over/);
    expect(message).toContain(`remove the lock file by hand`);
    expect(readFileSync(`${file}.lock`, 'utf8')).toBe(foreign);
  });

  it('a lock file that holds no lock record is refused, not guessed at', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(`${file}.lock`, 'not a lock\u001b[2J');
    const message = refusal(() => openResults(file));
    expect(message).toContain('"not a lock\\u001b[2J"');
    expect(message).not.toMatch(CONTROL);
  });

  it('a forced exit without close() still releases the lock', async () => {
    const file = path.join(tempDir(), 'results.jsonl');
    const child = nodeChild(
      file,
      `openResults(FILE);
process.stdout.write('locked\\n');
process.exit(3);`,
    );
    await child.firstLine;
    expect((await child.exit).code).toBe(3);
    expect(existsSync(`${file}.lock`)).toBe(false);
  });

  it('close() is idempotent and removes its exit listener; a second open in one process is refused', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    const listeners = process.listenerCount('exit');
    const results = openResults(file);
    expect(process.listenerCount('exit')).toBe(listeners + 1);
    expect(refusal(() => openResults(file))).toContain(`pid ${process.pid}`);
    results.close();
    results.close();
    expect(process.listenerCount('exit')).toBe(listeners);
    expect(existsSync(`${file}.lock`)).toBe(false);
    expect(() => results.append(result('x', 'complete'))).toThrow(/closed/);
  });
});

describe('what --out may be', () => {
  /** Asserts openResults refuses `file`, leaving its bytes and its folder's entries as they were. */
  function refusedUnchanged(file: string, options = {}): string {
    const before = readFileSync(file);
    const entries = existsSync(`${file}.lock`);
    const message = refusal(() => openResults(file, options));
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(existsSync(`${file}.lock`)).toBe(entries);
    expect(message).not.toMatch(CONTROL);
    return message;
  }

  it('a notes file is refused with its name and the first offending line, and left unchanged', () => {
    const file = path.join(tempDir(), 'notes.md');
    writeFileSync(file, `${line('a', 'complete')}\n${line('b', 'failed')}\n# my notes\nmore\n`);
    const message = refusedUnchanged(file);
    expect(message).toContain(file);
    expect(message).toMatch(/got line 3: not JSON: "# my notes"/);
    expect(message).toMatch(/^Expected --out .* to be empty or a cohort results file/);
  });

  it('a line with an unknown outcome or no taskId is refused, naming what it holds', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(file, `${line('a', 'complete')}\n{"taskId":"b","outcome":"great"}\n`);
    expect(refusedUnchanged(file)).toMatch(/line 2: "outcome" is `"great"` \(string\), not one of/);
    writeFileSync(file, '{"id":"t1","prompt":"x"}\n');
    expect(refusedUnchanged(file)).toMatch(/line 1: "taskId" is nothing/);
    writeFileSync(file, '[1,2]\n');
    expect(refusedUnchanged(file)).toMatch(/line 1: not a JSON object/);
  });

  it('a one-line notes file without a newline is not mistaken for a torn line', () => {
    const file = path.join(tempDir(), 'notes.txt');
    writeFileSync(file, 'remember the milk');
    expect(refusedUnchanged(file)).toMatch(/line 1: not JSON: "remember the milk"/);
    // A whole JSON object written without a newline (printf) is someone's config, not a torn
    // result line: refused and left as it was, never cut.
    writeFileSync(file, '{"name":"my-config","version":"1.0.0","important":true}');
    expect(refusedUnchanged(file)).toMatch(/line 1/);
  });

  it('a binary file is refused and no control character of it is echoed', () => {
    const file = path.join(tempDir(), 'image.bin');
    // ESC [2J (clear screen), NUL, CSI as a C1 character, BEL, CR; then a second line.
    writeFileSync(
      file,
      Buffer.concat([Buffer.from('\u001b[2J\u0000\u009b\u0007\r\n', 'utf8'), Buffer.from([0xff])]),
    );
    const message = refusedUnchanged(file);
    expect(message).toMatch(/line 1: not JSON: "\\u001b\[2J\\u0000\\x9b\\u0007\\r"/);
  });

  it('the tasks file is refused as --out, also through a symbolic link', () => {
    const folder = tempDir();
    const tasks = path.join(folder, 'tasks.jsonl');
    writeFileSync(tasks, '{"id":"a","prompt":"one"}\n');
    expect(refusedUnchanged(tasks, { tasksFile: tasks })).toMatch(/which is the tasks file/);
    const link = path.join(folder, 'out.jsonl');
    symlinkSync(tasks, link);
    expect(refusedUnchanged(link, { tasksFile: tasks })).toMatch(/which is the tasks file/);
  });

  it('a directory is refused with its name in the message', () => {
    const folder = path.join(tempDir(), 'results-folder');
    mkdirSync(folder);
    const message = refusal(() => openResults(folder));
    expect(message).toContain(`got the directory ${folder}`);
    expect(existsSync(`${folder}.lock`)).toBe(false);
  });

  it('/dev/null, /dev/zero and a FIFO are refused without being opened', () => {
    expect(refusal(() => openResults('/dev/null'))).toMatch(/got a character device/);
    expect(refusal(() => openResults('/dev/zero'))).toMatch(/got a character device/);
    const fifo = path.join(tempDir(), 'pipe');
    execFileSync('mkfifo', [fifo]);
    // Opening a FIFO for reading would block this test forever; refusing must not.
    expect(refusal(() => openResults(fifo))).toMatch(/got a FIFO/);
    expect(existsSync(`${fifo}.lock`)).toBe(false);
  });

  it('a socket is refused', async () => {
    const socket = path.join(tempDir(), 'sock');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      expect(refusal(() => openResults(socket))).toMatch(/got a socket/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a missing folder or a file in the folder position is a clear usage error', () => {
    const folder = tempDir();
    const missing = path.join(folder, 'nope', 'results.jsonl');
    expect(refusal(() => openResults(missing))).toBe(
      `Expected the folder of --out ${missing} to exist, got no folder ${path.join(folder, 'nope')}. Create it first.`,
    );
    const regular = path.join(folder, 'file.txt');
    writeFileSync(regular, 'x');
    expect(refusal(() => openResults(path.join(regular, 'results.jsonl')))).toContain(
      `got ${regular}, which is a file`,
    );
    expect(refusal(() => openResults(path.join(regular, 'deeper', 'r.jsonl')))).toContain(
      'got a path through a file',
    );
  });

  it('a missing path in an existing folder is created empty', () => {
    const file = path.join(tempDir(), 'new.jsonl');
    const results = openResults(file);
    expect(results.path).toBe(realpathSync(file));
    expect(results.done.size).toBe(0);
    results.close();
    expect(readFileSync(file, 'utf8')).toBe('');
  });
});

describe('reading and compacting a results file', () => {
  it('a torn last line is cut in place; whole lines stay byte for byte', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    const whole = `${line('a', 'complete')}\n${line('b', 'failed')}\n`;
    writeFileSync(file, `${whole}{"id":"agent-c","taskId":"c","outcome":"compl`);
    const inode = statSync(file).ino;
    const results = openResults(file);
    expect(results.dropped).toBe(1);
    expect([...results.done]).toEqual(['a', 'b']);
    results.append(result('c', 'complete'));
    results.close();
    expect(statSync(file).ino).toBe(inode);
    const text = readFileSync(file, 'utf8');
    expect(text.startsWith(whole)).toBe(true);
    expect(taskIds(file)).toEqual(['a', 'b', 'c']);
  });

  it('a whole last line missing only its newline is kept and ended', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(file, `${line('a', 'complete')}\n${line('b', 'complete')}`);
    const results = openResults(file);
    expect(results.dropped).toBe(0);
    results.append(result('c', 'complete'));
    results.close();
    expect(taskIds(file)).toEqual(['a', 'b', 'c']);
  });

  it('keeps the first final line per task; drops interrupted cancels and duplicates', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(
      file,
      [
        line('a', 'cancelled', 'user'),
        line('a', 'complete'),
        line('b', 'cancelled', 'ceiling'),
        line('c', 'cancelled', 'shutdown'),
        line('a', 'failed'),
        line('d', 'empty'),
        '',
      ].join('\n'),
    );
    const results = openResults(file);
    expect(results.dropped).toBe(3);
    expect(results.retried).toBe(0);
    expect([...results.done].sort()).toEqual(['a', 'b', 'd']);
    expect([...results.completeIds()]).toEqual(['a']);
    results.close();
    expect(readFileSync(file, 'utf8')).toBe(
      `${[line('a', 'complete'), line('b', 'cancelled', 'ceiling'), line('d', 'empty')].join('\n')}\n`,
    );
  });

  it('retryFailed drops the failed lines so those tasks run again; one line per task after', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(
      file,
      `${[line('a', 'complete'), line('b', 'failed'), line('c', 'failed'), line('d', 'capped')].join('\n')}\n`,
    );
    const kept = openResults(file);
    expect(kept.retried).toBe(0);
    expect(kept.done.has('b')).toBe(true);
    kept.close();
    const retry = openResults(file, { retryFailed: true });
    expect(retry.retried).toBe(2);
    expect(retry.dropped).toBe(0);
    expect([...retry.done].sort()).toEqual(['a', 'd']);
    retry.append(result('b', 'complete'));
    retry.append(result('c', 'failed'));
    expect([...retry.completeIds()].sort()).toEqual(['a', 'b']);
    retry.close();
    expect(taskIds(file)).toEqual(['a', 'd', 'b', 'c']);
  });

  it('replays a compaction journal a crash left behind, and ignores one for another file', () => {
    const folder = tempDir();
    const file = path.join(folder, 'results.jsonl');
    const compacted = `${line('a', 'complete')}\n${line('b', 'complete')}\n`;
    // The state after a kill half way through copying the journal over the file: its start is
    // new content, its end old, with a broken line where they meet.
    writeFileSync(file, `${compacted.slice(0, 30)}${line('x', 'cancelled', 'user')}\n`);
    const stat = statSync(file, { bigint: true });
    const header = { cohortCompaction: 1, dev: String(stat.dev), ino: String(stat.ino) };
    writeFileSync(`${file}.compact`, `${JSON.stringify(header)}\n${compacted}`);
    const results = openResults(file);
    results.close();
    expect(readFileSync(file, 'utf8')).toBe(compacted);
    expect(existsSync(`${file}.compact`)).toBe(false);
    // A journal whose file was since replaced (another inode) is discarded, not replayed.
    const other = `${line('z', 'complete')}\n`;
    // Written beside and renamed in while the old file still exists: surely another inode.
    writeFileSync(`${file}.new`, other);
    renameSync(`${file}.new`, file);
    writeFileSync(`${file}.compact`, `${JSON.stringify(header)}\n${compacted}`);
    writeFileSync(`${file}.compact.tmp`, 'half a journal');
    openResults(file).close();
    expect(readFileSync(file, 'utf8')).toBe(other);
    expect(existsSync(`${file}.compact`)).toBe(false);
    expect(existsSync(`${file}.compact.tmp`)).toBe(false);
  });

  it('property: after open, one line per task, no interrupted cancels, a subsequence of the input, and reopening changes nothing', () => {
    const folder = tempDir();
    const outcome = fc.constantFrom<{ kind: string; reason?: string }>(
      { kind: 'complete' },
      { kind: 'failed' },
      { kind: 'empty' },
      { kind: 'capped' },
      { kind: 'cancelled', reason: 'user' },
      { kind: 'cancelled', reason: 'shutdown' },
      { kind: 'cancelled', reason: 'ceiling' },
    );
    const entry = fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), outcome);
    let round = 0;
    fc.assert(
      fc.property(
        fc.array(entry, { maxLength: 12 }),
        fc.boolean(),
        fc.boolean(),
        (entries, torn, retryFailed) => {
          const file = path.join(folder, `r${round++}.jsonl`);
          const lines = entries.map(([id, { kind, reason }]) => line(id, kind, reason));
          writeFileSync(
            file,
            lines.map((text) => `${text}\n`).join('') + (torn ? '{"id":"agent-e","task' : ''),
          );
          const results = openResults(file, { retryFailed });
          results.close();
          const after = readFileSync(file, 'utf8').split('\n').slice(0, -1);
          const ids = after.map((text) => (JSON.parse(text) as { taskId: string }).taskId);
          expect(new Set(ids).size).toBe(ids.length);
          expect(new Set(ids)).toEqual(new Set(results.done));
          for (const text of after) {
            const parsed = JSON.parse(text) as { outcome: string; reason?: string };
            expect(parsed.reason === 'user' || parsed.reason === 'shutdown').toBe(false);
            if (retryFailed) expect(parsed.outcome).not.toBe('failed');
          }
          // Kept lines are input lines, in input order: nothing invented, nothing reordered.
          let cursor = 0;
          for (const text of after) {
            const index = lines.indexOf(text, cursor);
            expect(index).toBeGreaterThanOrEqual(0);
            cursor = index + 1;
          }
          expect(after.length + results.dropped + results.retried).toBe(
            lines.length + (torn ? 1 : 0),
          );
          const again = openResults(file);
          again.close();
          expect(again.dropped + again.retried).toBe(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});
