import type { ChildSpec } from '../../shared/child-spec.js';
import type { Governor } from '../../shared/governor/governor.js';
import type { MainMessage, WorkerMessage } from '../../shared/protocol.js';
import type { AgentResult } from '../../shared/result.js';
import { type LaneAttachment, LaneChild } from '../lanes/lane-child.js';
import type { ChildTrace } from '../tracing/agent-trace.js';
import { type TreeLedger, TreeMember } from '../tree-budget.js';
import { GovernedChild } from './local/governor-link.js';

/** The kinds of message a worker sends up about a child. */
export type UplinkKind = WorkerMessage['type'];
/** The uplink messages of `Kind`. */
export type Uplink<Kind extends UplinkKind> = Extract<WorkerMessage, { type: Kind }>;

/** What a capability may do with the child it serves. */
export interface ServedChild {
  readonly id: string;
  readonly status: 'queued' | 'running' | 'settled';
  /**
   * Sends the child a message on its current run, once that run's worker is known. A child not
   * on a worker (still queued, or in queue mode) hears nothing: `runStarts` is where to say
   * again what every run must hear.
   */
  tell(message: MainMessage): void;
  /** Reads what the child's worker has posted and main has not read yet. */
  readUplink(): void;
}

/**
 * What serves one child for one capability, from its spawn until it settles. Every hook is
 * optional; a runner that does not run children on this machine's workers (the queue) calls
 * only `settled`.
 */
export interface Serving<Kind extends UplinkKind = UplinkKind> {
  /** A message of one of the capability's kinds, from the child's current run. */
  receive?(message: Uplink<Kind>): void;
  /** A run of the child starts on a worker: its first, or one after a lost worker. */
  runStarts?(): void;
  /** Its run is over: its task ended, or its worker was lost. */
  runEnds?(): void;
  /** Its worker was lost and it starts again on another: what the old run left is void. */
  resumed?(): void;
  /** It settled, with `result` (exactly once). */
  settled?(result: AgentResult): void;
}

/** One per-child capability: how a spawner's attachment turns it on and serves the child. */
interface Capability<Attached, Kind extends UplinkKind> {
  /** The spec fields by which the child's worker turns the capability on. */
  flag(attached: Attached): Partial<ChildSpec>;
  /** The uplink messages that are the capability's: they go to its `receive`. */
  kinds: readonly Kind[];
  /** What serves one child, made when it is spawned. */
  serve(attached: Attached, child: ServedChild): Serving<Kind>;
}

function capability<Attached, Kind extends UplinkKind>(
  definition: Capability<Attached, Kind>,
): Capability<Attached, Kind> {
  return definition;
}

/** A committed transcript write of a checkpointed child (`spec.checkpoint`). */
export interface CheckpointWrite {
  /** With `replace`, `lines` is the whole new transcript (its first write after a resume). */
  replace: boolean;
  lines: string;
}

/**
 * Every per-child capability, by name: what a spawner attaches to turn it on for a child
 * (`SpawnExtras.capabilities`), the spec flag that turns it on in the worker, the uplink
 * messages it takes, and what serves the child. A new capability is one entry here, beside its
 * messages in `src/shared/protocol.ts`, its flag in `ChildSpec` and its worker side.
 */
export const CAPABILITIES = {
  /** Its spans are replayed into main's tracer (docs/TRACING.md). */
  trace: capability<ChildTrace, 'trace'>({
    flag: () => ({ traced: true }),
    kinds: ['trace'],
    serve: (trace, child) => trace.serving(child),
  }),
  /** It is a member of a tree budget held on main (docs/AGENTS.md). */
  tree: capability<TreeLedger, 'spend'>({
    flag: () => ({ inTree: true }),
    kinds: ['spend'],
    serve: (ledger, child) => new TreeMember(ledger, child),
  }),
  /** Its committed transcript writes are copied elsewhere (queue mode keeps them in Redis). */
  checkpoint: capability<(write: CheckpointWrite) => void, 'checkpoint'>({
    flag: () => ({ checkpoint: true }),
    kinds: ['checkpoint'],
    serve: (save) => ({
      receive: (message) => save({ replace: message.replace, lines: message.lines }),
    }),
  }),
  /** The rate-limit governor admits each of its provider attempts. */
  governor: capability<Governor, 'gov-admit' | 'gov-head' | 'gov-settle' | 'gov-withdraw'>({
    flag: (governor) => ({ governed: { patienceMs: governor.patienceMs } }),
    kinds: ['gov-admit', 'gov-head', 'gov-settle', 'gov-withdraw'],
    serve: (governor, child) => new GovernedChild(governor, child),
  }),
  /** Its model calls go into the engine's Message Batches (the batches lane, docs/LANES.md). */
  lane: capability<LaneAttachment, 'lane-submit' | 'lane-withdraw'>({
    flag: (attached) =>
      attached.deadline === undefined
        ? { lane: 'batches' }
        : { lane: 'auto', deadline: attached.deadline },
    kinds: ['lane-submit', 'lane-withdraw'],
    serve: (attached, child) => new LaneChild(attached, child),
  }),
};

export type CapabilityName = keyof typeof CAPABILITIES;

type AttachedTo<Name extends CapabilityName> = Parameters<(typeof CAPABILITIES)[Name]['serve']>[0];

/** What a spawner attaches to a child, for each capability it gives it. */
export type ChildCapabilities = { [Name in CapabilityName]?: AttachedTo<Name> };

/** What serves one child, by capability. */
export type Served = { [Name in CapabilityName]?: Serving };

/** Which capability takes each uplink kind; the others are the runner's own. */
const TAKER = new Map<string, CapabilityName>();
for (const name of Object.keys(CAPABILITIES) as CapabilityName[]) {
  for (const kind of CAPABILITIES[name].kinds) TAKER.set(kind, name);
}

/** The spec fields that turn `attached`'s capabilities on in the worker. */
export function capabilityFlags(attached: ChildCapabilities): Partial<ChildSpec> {
  const flags: Partial<ChildSpec> = {};
  for (const key in attached) {
    const name = key as CapabilityName;
    const value = attached[name];
    if (value !== undefined) Object.assign(flags, flagOf(name, value));
  }
  return flags;
}

function flagOf<Name extends CapabilityName>(
  name: Name,
  attached: AttachedTo<Name>,
): Partial<ChildSpec> {
  return (CAPABILITIES[name] as Capability<AttachedTo<Name>, UplinkKind>).flag(attached);
}

/** What serves a child given no capability. */
export const NOTHING_SERVED: Served = Object.freeze({});

/** What serves `child` for each capability `attached` gives it. */
export function serve(attached: ChildCapabilities | undefined, child: ServedChild): Served {
  if (attached === undefined) return NOTHING_SERVED;
  let served: Served | undefined;
  for (const key in attached) {
    const name = key as CapabilityName;
    const value = attached[name];
    if (value === undefined) continue;
    served ??= {};
    served[name] = serveOne(name, value, child);
  }
  return served ?? NOTHING_SERVED;
}

function serveOne<Name extends CapabilityName>(
  name: Name,
  attached: AttachedTo<Name>,
  child: ServedChild,
): Serving {
  return (CAPABILITIES[name] as Capability<AttachedTo<Name>, UplinkKind>).serve(attached, child);
}

/**
 * Hands an uplink message that is no runner's own to the capability that takes it; dropped when
 * the child was not given that capability.
 */
export function receive(served: Served, message: WorkerMessage): void {
  const name = TAKER.get(message.type);
  if (name !== undefined) served[name]?.receive?.(message);
}

/** A run of the child starts on a worker. */
export function runStarts(served: Served): void {
  for (const name in served) served[name as CapabilityName]!.runStarts?.();
}

/** The child's run is over. */
export function runEnds(served: Served): void {
  for (const name in served) served[name as CapabilityName]!.runEnds?.();
}

/** The child lost its worker and starts again on another. */
export function resumed(served: Served): void {
  for (const name in served) served[name as CapabilityName]!.resumed?.();
}

/** The child settled. */
export function settled(served: Served, result: AgentResult): void {
  for (const name in served) served[name as CapabilityName]!.settled?.(result);
}
