import type { MessagePort } from 'node:worker_threads';
import type { BudgetKind, StepSpend } from './budget.js';
import type { ChildSpec } from './child-spec.js';
import type { AgentEvent } from './events.js';
import type { Failure } from './failure.js';
import type { Admission, AdmitRequest, SettleReport } from './governor/types.js';
import type { MessagesBody } from './provider/transport/types.js';
import type { ContentBlockParam, ProviderResult } from './provider/types.js';
import type { AgentResult, CancelReason } from './result.js';
import type { ToolContentBlock } from './tools/content.js';
import type { AgentInfo, AgentReceipt, AgentToolInput } from './tools/spawn-tools.js';
import type { TraceOp, TraceSpanId } from './trace/types.js';

// Every message that crosses between main and a worker is defined here, once, for both sides.

/**
/**
 * One child as main hands it to a worker: its spec, the host bridge's port when the child has
 * host tools or may spawn, and what it carries beside its spec (`private`). Everything else the
 * child says travels on its worker's uplink.
 */
export interface ChildTask {
  spec: ChildSpec;
  bridge?: MessagePort;
  private?: ChildPrivate;
}

/**
 * What a child's task carries beside its spec, because the spec is journaled (its start record),
 * kept on main for the child's life and, in queue mode, stored in Redis: none of this may be.
 */
export interface ChildPrivate {
  /** The spawn's `context`, as its worker tools see it (`ToolContext.context`): a clone. */
  context?: unknown;
  /** The key its provider requests carry (`provider.apiKey`), instead of the environment's. */
  apiKey?: string;
}

/**
 * The piscina task: the children main handed one worker in one turn, as one post (a burst of
 * spawns used to cost a piscina task and a post per child; docs/BENCHMARKS.md, "Spawn burst").
 * They run side by side and apart; the task ends when the last of them has ended.
 */
export type ChildBatch = ChildTask[];

/**
 * What a batch's task resolves with: for each of its children, in order, `null` when its run
 * ended (its result was posted on the uplink first), else the message of what its run threw.
 */
export type BatchEnds = (string | null)[];

// ── A worker's uplink ──────────────────────────────────────────────────────────────────────────

/**
 * Worker → main over `parentPort` (piscina passes it on as the pool's `message` event), once per
 * worker before it runs any child: the main end of the worker's uplink, one port that carries the
 * messages of every child on that worker. The worker runs no child until main answers `open` on
 * the uplink, so main always holds a worker's uplink before anything of its children can be read
 * or be missing.
 */
export interface UplinkHello {
  type: 'cohort-uplink';
  threadId: number;
  port: MessagePort;
}

/** Main → worker on the uplink: main holds the uplink, children may run. Sent once, first. */
export interface UplinkOpen {
  type: 'uplink-open';
}

/**
 * One post on the uplink, either way: the messages of one tick, in order, each tagged with the
 * id of the child it is about. A post per tick instead of a post per message (docs/BENCHMARKS.md,
 * "Messaging and spawn"). `ping` and `pong` are about the worker itself: main asks whether the
 * worker's event loop still turns (a cancelled child is slow to settle), the worker answers.
 */
export type UplinkPost = ((WorkerMessage & { child: string }) | { type: 'pong' })[];
export type DownlinkPost = ((MainMessage & { child: string }) | { type: 'ping' })[];

/**
 * Worker → main, about one child. `tool-enter`/`tool-exit` bracket a tool that runs in the worker
 * (not one that runs on main through the bridge); they are sent whether or not anyone listens to
 * events, because crash forensics rests on them.
 */
export type WorkerMessage =
  | { type: 'started'; threadId: number }
  | { type: 'event'; event: AgentEvent }
  /**
   * A timed call also names its tool and its limit: main's watchdog terminates this worker if the
   * call is still open, and the worker silent, past that limit and the grace (`toolGraceMs`).
   */
  | { type: 'tool-enter'; callId: string; tool?: string; timeoutMs?: number }
  | { type: 'tool-exit'; callId: string }
  | { type: 'result'; result: AgentResult }
  /** A span operation of a traced child (`spec.traced`), replayed into main's tracer. */
  | { type: 'trace'; op: TraceOp }
  /** A step's spend of a child in a tree budget (`spec.inTree`). */
  | { type: 'spend'; spend: StepSpend }
  /**
   * A committed transcript write of a checkpointed child (`spec.checkpoint`): `lines` is the
   * text appended to transcript.jsonl or, with `replace`, its whole new content (a resume).
   */
  | { type: 'checkpoint'; replace: boolean; lines: string }
  | GovernorRequest
  | LaneRequest;

/**
 * Worker → main, for a child in the batches lane (`spec.lane`): a step's request goes into the
 * next Message Batch (`lane-submit`, `params` being the request's body without `stream`), or is
 * no longer wanted (`lane-withdraw`, the child was cancelled). `id` is the worker's own number.
 */
export type LaneRequest =
  | { type: 'lane-submit'; id: number; step: number; params: LaneParams }
  | { type: 'lane-withdraw'; id: number };

/** A Messages request's body as a batch request's `params`: never streamed. */
export type LaneParams = Omit<MessagesBody, 'stream'>;

/**
 * Worker → main: the child's provider asks the rate-limit governor for admission, settles an
 * admitted attempt, or withdraws one it no longer wants (cancelled while queued). `id` is the
 * worker's own number for the attempt.
 */
export type GovernorRequest =
  | { type: 'gov-admit'; id: number; request: AdmitRequest }
  | { type: 'gov-settle'; id: number; report: SettleReport }
  /** An admitted attempt's response began: its rate-limit headers, for a cold key to open on. */
  | { type: 'gov-head'; id: number; headers: Record<string, string> }
  | { type: 'gov-withdraw'; id: number };

/** Main → worker, about one child. */
export type MainMessage =
  | { type: 'cancel'; reason: CancelReason }
  /** A tree budget the child belongs to is spent: it takes its last turn. */
  | { type: 'budget-spent'; which: BudgetKind }
  | { type: 'gov-admission'; id: number; admission: Admission }
  /** A batches-lane step's answer: its batch's result as the provider's would be. */
  | { type: 'lane-answer'; id: number; result: ProviderResult }
  /** An `auto`-lane step left the collector (its deadline nears): it goes in real time. */
  | { type: 'lane-realtime'; id: number };

/** Checks a child's message from a worker; anything else is ignored, never trusted. */
export function isWorkerMessage(value: unknown): value is WorkerMessage {
  if (!isRecord(value)) return false;
  switch (value.type) {
    case 'started':
      return typeof value.threadId === 'number';
    case 'event':
      return isRecord(value.event);
    case 'tool-enter':
    case 'tool-exit':
      return typeof value.callId === 'string';
    case 'result':
      return (
        isRecord(value.result) &&
        typeof value.result.id === 'string' &&
        typeof value.result.outcome === 'string'
      );
    case 'trace':
      return isRecord(value.op) && typeof value.op.id === 'number';
    case 'spend':
      return isRecord(value.spend);
    case 'checkpoint':
      return typeof value.replace === 'boolean' && typeof value.lines === 'string';
    case 'gov-admit':
      return typeof value.id === 'number' && isRecord(value.request);
    case 'gov-settle':
      return typeof value.id === 'number' && isRecord(value.report);
    case 'gov-head':
      return typeof value.id === 'number' && isRecord(value.headers);
    case 'gov-withdraw':
    case 'lane-withdraw':
      return typeof value.id === 'number';
    case 'lane-submit':
      return (
        typeof value.id === 'number' && typeof value.step === 'number' && isRecord(value.params)
      );
    default:
      return false;
  }
}

export function isMainMessage(value: unknown): value is MainMessage {
  if (!isRecord(value)) return false;
  if (value.type === 'cancel') return typeof value.reason === 'string';
  if (value.type === 'budget-spent') return typeof value.which === 'string';
  if (value.type === 'lane-answer') return typeof value.id === 'number' && isRecord(value.result);
  if (value.type === 'lane-realtime') return typeof value.id === 'number';
  return (
    value.type === 'gov-admission' && typeof value.id === 'number' && isRecord(value.admission)
  );
}

/** Whether a message on `parentPort` is a worker's uplink hello (piscina's own carry no `type`). */
export function isUplinkHello(value: unknown): value is UplinkHello {
  return (
    isRecord(value) &&
    value.type === 'cohort-uplink' &&
    typeof value.threadId === 'number' &&
    isRecord(value.port)
  );
}

/** Calls `each` for every well-formed message of an uplink post; anything else is ignored. */
export function forEachUplinkMessage(
  batch: unknown,
  each: (child: string, message: WorkerMessage) => void,
): void {
  if (!Array.isArray(batch)) return;
  for (const item of batch) {
    const child = isRecord(item) ? item.child : undefined;
    if (typeof child === 'string' && isWorkerMessage(item)) each(child, item);
  }
}

/** The same for a post main sent down the uplink; `ping` is called for a ping. */
export function forEachDownlinkMessage(
  batch: unknown,
  each: (child: string, message: MainMessage) => void,
  ping: () => void,
): void {
  if (!Array.isArray(batch)) return;
  for (const item of batch) {
    if (isRecord(item) && item.type === 'ping') ping();
    const child = isRecord(item) ? item.child : undefined;
    if (typeof child === 'string' && isMainMessage(item)) each(child, item);
  }
}

// ── The host bridge ────────────────────────────────────────────────────────────────────────────

/** A host tool's outcome as it crosses back to the worker: data, never an Error. */
export type HostToolOutcome =
  /** `blocks`: the tool answered with content blocks (an image among them), not a value. */
  | { ok: true; text: string; blocks?: ToolContentBlock[] }
  /** `timedOut`: the call ran past its tool's time limit; `error` is the model's text as it is. */
  | { ok: false; error: string; timedOut?: true };

/**
 * What a child in a worker may ask of the main thread: each method's input and output. Both ends
 * are typed from this one table.
 */
export interface HostMethods {
  callTool: { input: { name: string; input: unknown }; output: HostToolOutcome };
  runSync: { input: SpawnRequest; output: string };
  spawnAsync: { input: SpawnRequest; output: AgentReceipt };
  list: { input: null; output: AgentInfo[] };
  cancel: { input: { id: string }; output: { id: string; wasLive: boolean } };
  /** Takes the pending results of the child's own async agents, rendered. */
  takeInbox: { input: null; output: ContentBlockParam[] };
  /** Resolves true once a result is pending, false when none can come. */
  waitForResult: { input: null; output: boolean };
}

export type HostMethod = keyof HostMethods;

/** A spawn through the bridge: the `agent` tool's input, and the span of that tool call. */
export interface SpawnRequest {
  input: AgentToolInput;
  /** The calling `execute_tool` span, in the child's trace sink (when it is traced). */
  span?: TraceSpanId;
  /** The tool_use id of the calling `agent` call: the spawn's key in its parent's scope. */
  callId?: string;
}

export const HOST_METHODS: readonly HostMethod[] = [
  'callTool',
  'runSync',
  'spawnAsync',
  'list',
  'cancel',
  'takeInbox',
  'waitForResult',
];

/** Worker → main: start a call, or abort one (the child was cancelled while it waited). */
export type BridgeRequest =
  | {
      [M in HostMethod]: { type: 'call'; id: number; method: M; input: HostMethods[M]['input'] };
    }[HostMethod]
  | { type: 'abort'; id: number };

/** Main → worker: how a call ended. A failure is data; nothing is thrown across. */
export type BridgeResponse =
  | { type: 'return'; id: number; ok: true; value: unknown }
  | { type: 'return'; id: number; ok: false; failure: Failure };

export function isBridgeRequest(value: unknown): value is BridgeRequest {
  if (!isRecord(value) || typeof value.id !== 'number') return false;
  if (value.type === 'abort') return true;
  return (
    value.type === 'call' &&
    typeof value.method === 'string' &&
    (HOST_METHODS as readonly string[]).includes(value.method)
  );
}

export function isBridgeResponse(value: unknown): value is BridgeResponse {
  return (
    isRecord(value) &&
    value.type === 'return' &&
    typeof value.id === 'number' &&
    typeof value.ok === 'boolean'
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** What the start-up tool probe worker reports: one message per module, in order, then `done`. */
export type ProbeMessage =
  | { type: 'module'; index: number; names: string[] }
  | { type: 'error'; index: number; problem: string }
  | { type: 'done' };
