import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  NO_WORKER_AFTER_MS,
  noWorkerMessage,
  WAITING_FOR_A_WORKER,
  WorkerStall,
  workerCommand,
} from '../src/cli/queue-watch.js';
import { BatchProgress, BatchTally } from '../src/cli/views/batch-progress.js';
import { LineCadence } from '../src/cli/views/line-cadence.js';
import type { AgentResult } from '../src/shared/result.js';
import { emptyUsage } from '../src/shared/result.js';

// When a batch speaks while nothing happens: plain progress lines off a terminal (at once on a
// change, at most one per 2 s, at least one per 30 s), and the stall of a queue no worker takes
// from. Times are given, or the clock is vitest's fake one: the rules are about 30 s and 10 s.

describe('LineCadence', () => {
  const cadence = () => new LineCadence({ minMs: 2000, maxMs: 30_000, start: 0, state: 'a' });

  it('writes the first change at once, then at most one per minMs', () => {
    const lines = cadence();
    expect(lines.due(10, 'a')).toBe(false);
    expect(lines.due(10, 'b')).toBe(true);
    lines.wrote(10, 'b');
    expect(lines.due(500, 'c')).toBe(false);
    expect(lines.due(2009, 'c')).toBe(false);
    expect(lines.due(2010, 'c')).toBe(true);
  });

  it('writes a line every maxMs when nothing changes, from the start and from each line', () => {
    const lines = cadence();
    expect(lines.due(29_999, 'a')).toBe(false);
    expect(lines.due(30_000, 'a')).toBe(true);
    lines.wrote(30_000, 'a');
    expect(lines.due(59_999, 'a')).toBe(false);
    expect(lines.due(60_000, 'a')).toBe(true);
  });

  it('says whether a state differs from the last line', () => {
    const lines = cadence();
    expect(lines.changed('a')).toBe(false);
    expect(lines.changed('b')).toBe(true);
  });
});

describe('WorkerStall', () => {
  const reading = (waiting: number, active: number, settled: number) => ({
    waiting,
    active,
    settled,
  });

  it('tells a stall once, 10 s after jobs began waiting with none taken', () => {
    const stall = new WorkerStall({ afterMs: NO_WORKER_AFTER_MS, start: 0 });
    expect(stall.observe(1000, reading(12, 0, 0))).toBeUndefined();
    expect(stall.observe(9999, reading(12, 0, 0))).toBeUndefined();
    expect(stall.observe(10_000, reading(12, 0, 0))).toBe('stalled');
    expect(stall.stalled).toBe(true);
    expect(stall.observe(11_000, reading(12, 0, 0))).toBeUndefined();
    expect(stall.observe(60_000, reading(12, 0, 0))).toBeUndefined();
  });

  it('is no stall while a job runs, with others waiting behind it', () => {
    const stall = new WorkerStall({ afterMs: 10_000, start: 0 });
    for (let now = 1000; now <= 60_000; now += 1000) {
      expect(stall.observe(now, reading(40, 8, 0))).toBeUndefined();
    }
  });

  it('is no stall while nothing waits (the jobs not added yet, or all taken)', () => {
    const stall = new WorkerStall({ afterMs: 10_000, start: 0 });
    expect(stall.observe(30_000, reading(0, 0, 0))).toBeUndefined();
    // The wait counts from the last reading with nothing waiting.
    expect(stall.observe(31_000, reading(5, 0, 0))).toBeUndefined();
    expect(stall.observe(39_999, reading(5, 0, 0))).toBeUndefined();
    expect(stall.observe(40_000, reading(5, 0, 0))).toBe('stalled');
  });

  it('a result between two readings counts as a job taken', () => {
    const stall = new WorkerStall({ afterMs: 10_000, start: 0 });
    expect(stall.observe(9000, reading(5, 0, 1))).toBeUndefined();
    expect(stall.observe(18_999, reading(5, 0, 1))).toBeUndefined();
    expect(stall.observe(19_000, reading(5, 0, 1))).toBe('stalled');
  });

  it('ends when a worker takes a job, and is told again when workers come and go', () => {
    const stall = new WorkerStall({ afterMs: 10_000, start: 0 });
    expect(stall.observe(10_000, reading(5, 0, 0))).toBe('stalled');
    expect(stall.observe(11_000, reading(4, 1, 0))).toBe('resumed');
    expect(stall.stalled).toBe(false);
    expect(stall.observe(12_000, reading(3, 1, 1))).toBeUndefined();
    // The worker left: from its last sign of work, 10 s again.
    expect(stall.observe(13_000, reading(3, 0, 2))).toBeUndefined();
    expect(stall.observe(22_999, reading(3, 0, 2))).toBeUndefined();
    expect(stall.observe(23_000, reading(3, 0, 2))).toBe('stalled');
  });
});

describe('the no-worker message', () => {
  it('names the queue and the command that starts a worker on it', () => {
    expect(
      noWorkerMessage({
        queue: { url: 'redis://q.internal:6379' },
        waiting: 12,
        afterMs: 10_000,
        connected: 0,
      }),
    ).toBe(
      'cohort batch: no worker has taken a job for 10s (12 waiting in queue cohort at redis://q.internal:6379); start one with: cohort worker --queue redis://q.internal:6379',
    );
  });

  it('never prints a password, and says to put it back in the command', () => {
    const secret = 'p4ss-w0rd';
    const message = noWorkerMessage({
      queue: { url: `redis://:${secret}@q.internal:6379/2`, name: 'digest' },
      waiting: 3,
      afterMs: 10_000,
      connected: undefined,
    });
    expect(message).not.toContain(secret);
    expect(message).toBe(
      "cohort batch: no worker has taken a job for 10s (3 waiting in queue digest at redis://:***@q.internal:6379/2); start one with: cohort worker --queue 'redis://:***@q.internal:6379/2' --queue-name digest (with the password where *** stands)",
    );
  });

  it('quotes what the shell would split', () => {
    expect(workerCommand({ url: '/run/my redis/r.sock', name: "team's q" })).toBe(
      "cohort worker --queue '/run/my redis/r.sock' --queue-name 'team'\\''s q'",
    );
  });

  it('with workers connected that take nothing, points at the queue status instead', () => {
    expect(
      noWorkerMessage({
        queue: { url: '/run/r.sock', name: 'digest' },
        waiting: 7,
        afterMs: 10_000,
        connected: 2,
      }),
    ).toBe(
      'cohort batch: no worker has taken a job for 10s (7 waiting in queue digest at /run/r.sock), though 2 worker(s) are connected to it; see cohort queue status --queue /run/r.sock --queue-name digest',
    );
  });
});

describe('BatchProgress off a terminal', () => {
  let written: string[];
  let wasTTY: PropertyDescriptor | undefined;

  beforeEach(() => {
    vi.useFakeTimers();
    written = [];
    // Its lines go to the process's real stderr; they are read here instead of printed.
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    wasTTY = Object.getOwnPropertyDescriptor(process.stderr, 'isTTY');
    Object.defineProperty(process.stderr, 'isTTY', { value: false, configurable: true });
  });

  afterEach(() => {
    vi.restoreAllMocks();
    vi.useRealTimers();
    if (wasTTY) Object.defineProperty(process.stderr, 'isTTY', wasTTY);
    else delete (process.stderr as { isTTY?: boolean }).isTTY;
  });

  function result(id: string): AgentResult {
    return {
      id,
      title: id,
      outcome: 'complete',
      text: 'ok',
      truncated: false,
      elapsedMs: 1,
      generation: 0,
      usage: emptyUsage(),
    };
  }

  const lines = () =>
    written
      .join('')
      .split('\n')
      .filter((line) => line !== '');

  it('writes a line every 30 s while nothing settles', () => {
    const progress = new BatchProgress({ total: 3, quiet: false, tally: new BatchTally() });
    vi.advanceTimersByTime(29_000);
    expect(lines()).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(lines()).toEqual(['cohort batch: 0/3 done (starting), 0.0/s, ETA …']);
    vi.advanceTimersByTime(30_000);
    expect(lines()).toHaveLength(2);
    progress.stop();
    vi.advanceTimersByTime(60_000);
    expect(lines()).toHaveLength(2);
  });

  it('shows what it waits for in place of `starting`, until a task settles', () => {
    const tally = new BatchTally();
    const progress = new BatchProgress({ total: 3, quiet: false, tally });
    vi.advanceTimersByTime(10_000);
    progress.waitingFor(WAITING_FOR_A_WORKER);
    expect(lines()).toEqual(['cohort batch: 0/3 done (waiting for a worker), 0.0/s, ETA …']);
    vi.advanceTimersByTime(5000);
    tally.settle(result('a'));
    progress.update();
    expect(lines()[1]).toMatch(/^cohort batch: 1\/3 done \(1 complete\), /);
    progress.stop();
  });

  it('a settle within 2 s of the last line is written by the next tick, not lost', () => {
    const tally = new BatchTally();
    const progress = new BatchProgress({ total: 3, quiet: false, tally });
    tally.settle(result('a'));
    progress.update();
    tally.settle(result('b'));
    progress.update();
    expect(lines()).toHaveLength(1);
    vi.advanceTimersByTime(2000);
    expect(lines()).toHaveLength(2);
    expect(lines()[1]).toMatch(/^cohort batch: 2\/3 done \(2 complete\), /);
    // The last settle is written at once, and once.
    tally.settle(result('c'));
    progress.update();
    progress.update();
    vi.advanceTimersByTime(1000);
    expect(lines()).toHaveLength(3);
    expect(lines()[2]).toMatch(/^cohort batch: 3\/3 done \(3 complete\), /);
    progress.stop();
  });
});
