/**
 * cohort: run LLM sub-agents in parallel on Node worker threads.
 * The scripted model for offline tests is in `cohort-agents/testing`.
 */
export {
  type AgentDefinition,
  type AgentFile,
  AgentFileError,
  AgentFolderError,
} from './main/agents/definition.js';
export {
  DASHBOARD_CANCEL,
  type Dashboard,
  type DashboardOptions,
  type DashboardTarget,
  serveDashboard,
} from './main/dashboard/dashboard.js';
export {
  type AgentOptions,
  type CheckEngineOptions,
  checkEngine,
  DEFAULT_CEILING_MS,
  Engine,
  type EngineOptions,
  type EngineWarning,
  type SpawnContext,
  startMcpServers,
} from './main/engine.js';
export type { EngineCheck } from './main/engine-check.js';
export type { AgentFileCheck, SpawnProvider } from './main/engine-options.js';
export {
  DRAIN_REASON,
  Group,
  type GroupOptions,
  type GroupState,
  type GroupTotals,
} from './main/group.js';
export type { JournaledStep } from './main/lanes/collector-options.js';
export {
  type MapContext,
  type MapOptions,
  mapAgents,
  type Spawner,
  type SpecValue,
} from './main/map-agents.js';
export type {
  McpHttpServer,
  McpServerConfig,
  McpServerSet,
  McpStdioServer,
} from './main/mcp/config.js';
export type { McpServers } from './main/mcp/servers.js';
export type { ChildHandle, ChildStatus, PoolStats } from './main/runners/local/pool.js';
export type { QueueOptions } from './main/runners/queue/options.js';
export {
  DEFAULT_ROOT_SYSTEM,
  ROOT_ID,
  Session,
  type SessionEvent,
  type SessionOptions,
  type TurnResult,
} from './main/session.js';
export type { ObservedSpawn, SpawnObserver } from './main/spawn-observer.js';
export type { Budget, BudgetKind, ModelPrice, PriceTable } from './shared/budget.js';
export { parseDuration } from './shared/duration.js';
export { CohortError, UsageError } from './shared/errors.js';
export type { AgentEvent, AgentMode } from './shared/events.js';
export { FAILURE_CODES, type Failure, type FailureCode } from './shared/failure.js';
export {
  type AgentHistory,
  JournalVersionError,
  readRun,
} from './shared/journal/reader.js';
export { BATCH_PRICE_FACTOR, LANES, type Lane } from './shared/lane/lane.js';
export type { CacheMode, CacheTtl } from './shared/provider/cache.js';
export type { ProviderConfig } from './shared/provider/config.js';
export { clip, DEFAULT_REPLY_CAP, renderValue } from './shared/render.js';
export type {
  AgentOutcome,
  AgentResult,
  AgentUsage,
  CancelReason,
  KnownCancelReason,
} from './shared/result.js';
export { CANCEL_REASONS, outcomeTag } from './shared/result.js';
export type { StandardOutput, StandardSchema } from './shared/standard-schema.js';
export type { ToolContentBlock } from './shared/tools/content.js';
export { ToolContent } from './shared/tools/content.js';
export type { OutputSchema } from './shared/tools/output-schema.js';
export type { AgentInfo, AgentReceipt, AgentToolInput } from './shared/tools/spawn-tools.js';
export type { InputSchema, ToolContext, ToolDefinition } from './shared/tools/types.js';
