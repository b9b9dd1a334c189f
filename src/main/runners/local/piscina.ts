import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { BatchEnds, ChildBatch } from '../../../shared/protocol.js';

/** Piscina's pick of a worker for a task (its `loadBalancer` option). */
export type Balancer = NonNullable<
  NonNullable<ConstructorParameters<typeof Piscina>[0]>['loadBalancer']
>;
/** A worker as a balancer sees it (`id` is its thread id). */
export type BalancedWorker = Parameters<Balancer>[1][number];
/** A task as a balancer sees it. */
export type BalancedTask = Parameters<Balancer>[0];

/** What a pool of worker threads is made from. */
export interface PiscinaShape {
  threads: number;
  perThread: number;
  minThreads: number;
  idleTimeoutMs?: number | undefined;
  maxOldGenerationSizeMb?: number | undefined;
  /** Picks the worker of each task (the pool routes each batch to the thread it chose). */
  balancer?: Balancer | undefined;
}

export type ChildPiscina = Piscina<ChildBatch, BatchEnds>;

/** The compiled worker file; under vitest (TS sources) it is the build in dist/. */
export function workerFile(): string {
  return builtFile('worker/entry.cjs');
}

/**
 * A compiled file of `src/` by its path under it (`worker/tool-probe.js`): threads load compiled
 * JavaScript, so under vitest (TS sources) it is the build in dist/.
 */
export function builtFile(relative: string): string {
  const here = fileURLToPath(import.meta.url);
  const root = path.resolve(path.dirname(here), '../../..');
  if (here.endsWith('.ts')) {
    const built = path.resolve(root, '../dist/src', relative);
    if (!existsSync(built)) throw new Error(`worker build missing at ${built}: run npm run build`);
    return built;
  }
  return path.resolve(root, relative);
}

export function makePiscina(shape: PiscinaShape): ChildPiscina {
  const piscina = new Piscina<ChildBatch, BatchEnds>({
    filename: workerFile(),
    minThreads: shape.minThreads,
    maxThreads: shape.threads,
    concurrentTasksPerWorker: shape.perThread,
    // Blocking idle workers in Atomics.wait starves the timers and port messages of async tasks.
    atomics: 'disabled',
    idleTimeout: shape.idleTimeoutMs ?? 60_000,
    maxQueue: Number.POSITIVE_INFINITY,
    ...(shape.balancer ? { loadBalancer: shape.balancer } : {}),
    ...(shape.maxOldGenerationSizeMb === undefined
      ? {}
      : { resourceLimits: { maxOldGenerationSizeMb: shape.maxOldGenerationSizeMb } }),
  });
  // Without a listener an 'error' event would crash the process; task failures arrive through
  // each task's own promise, so here they are only noted.
  piscina.on('error', () => {});
  return piscina;
}
