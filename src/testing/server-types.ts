import type { EventEmitter } from 'node:events';

/** Counters of what the server has answered so far. */
export interface ScriptedModelStats {
  /** Every HTTP request received, whatever its path. */
  requests: number;
  /**
   * Every `POST /v1/messages` received, answered or refused: the real-time requests. The
   * requests of a Message Batch never count here.
   */
  messages: number;
  /** 200 SSE responses started. */
  streamed: number;
  /** 200 responses (SSE or JSON) sent to the end. */
  completed: number;
  /** Responses cut short because the client closed the connection. */
  clientClosed: number;
  /** Responses with these statuses, scripted or not. */
  rejected400: number;
  rateLimited429: number;
  overloaded529: number;
  /** Message Batches created (`POST /v1/messages/batches` answered 200). */
  batchesCreated: number;
  /** The requests those batches hold, each answered through the batch. */
  batchRequests: number;
  /** Creates refused 429 because the key's processing queue was full (`batchQueueSize`). */
  batchCreatesRefused: number;
  /** Batches retrieved (`GET /v1/messages/batches/{id}` answered 200), polls included. */
  batchRetrieves: number;
  /** Results files downloaded (`GET /v1/messages/batches/{id}/results` answered 200). */
  batchResultDownloads: number;
}

export function emptyStats(): ScriptedModelStats {
  return {
    requests: 0,
    messages: 0,
    streamed: 0,
    completed: 0,
    clientClosed: 0,
    rejected400: 0,
    rateLimited429: 0,
    overloaded529: 0,
    batchesCreated: 0,
    batchRequests: 0,
    batchCreatesRefused: 0,
    batchRetrieves: 0,
    batchResultDownloads: 0,
  };
}

/** Counts a finished response by its status. */
export function countAnswer(stats: ScriptedModelStats, status: number): void {
  if (status === 200) stats.completed++;
  else if (status === 400) stats.rejected400++;
  else if (status === 429) stats.rateLimited429++;
  else if (status === 529) stats.overloaded529++;
}

/** Payload of the `request` event: a checked request about to be answered. */
export interface ScriptedRequestEvent {
  turn: number;
  attempt: number;
  stream: boolean;
  /** Names of the advertised tools, in request order: tells a root from a child. */
  tools: string[];
}

/** Payload of the `client-closed` event. */
export interface ScriptedClientClosedEvent {
  turn: number;
  attempt: number;
}

/**
 * A running scripted model. Events: `request` (ScriptedRequestEvent) for every checked
 * request, and `client-closed` (ScriptedClientClosedEvent) when a client closes its
 * connection before its response ended, which is how a test proves an abort reached the
 * server.
 */
export interface ScriptedModel extends EventEmitter {
  /** Base URL, e.g. `http://127.0.0.1:PORT`; pass it as the SDK's `baseURL`. */
  readonly url: string;
  readonly port: number;
  readonly stats: Readonly<ScriptedModelStats>;
  /** Stops listening, destroys every open connection and drops pending timers. */
  close(): Promise<void>;
}
