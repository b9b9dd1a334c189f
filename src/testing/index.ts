/**
 * `cohort-agents/testing`: the scripted model, an offline Anthropic Messages API server for
 * tests, demos and benchmarks. See docs/SCRIPTED-MODEL.md.
 */
export type { ScriptedModelOptions } from './load-model.js';
export { ScriptedModelOptionError } from './load-model.js';
export type {
  ParsedScript,
  Script,
  ScriptCall,
  ScriptError,
  ScriptReplyCall,
  ScriptStep,
  ScriptToolCall,
} from './script.js';
export { parseScript, scriptBlock } from './script.js';
export { mockCommand } from './serve-command.js';
export { startScriptedModel } from './server.js';
export type {
  ScriptedClientClosedEvent,
  ScriptedModel,
  ScriptedModelStats,
  ScriptedRequestEvent,
} from './server-types.js';
