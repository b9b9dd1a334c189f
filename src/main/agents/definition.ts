import type { Budget } from '../../shared/budget.js';
import { UsageError } from '../../shared/errors.js';

/**
 * A malformed agent file: the message starts with `FILE:LINE: `. Its field names are the file's
 * own, so the CLI shows it as it is (never rewritten to flag names).
 */
export class AgentFileError extends UsageError {}

/** The frontmatter fields an agent file may have. */
export const AGENT_FIELDS = [
  'name',
  'description',
  'model',
  'tools',
  'maxSteps',
  'budget',
  'outputSchema',
] as const;

export type AgentField = (typeof AGENT_FIELDS)[number];

/**
 * One named agent, from a `NAME.md` file: YAML frontmatter, and a body that is its system prompt
 * (docs/AGENTS.md). A spawn that names it (`agent: NAME`) takes these as its defaults.
 */
export interface AgentDefinition {
  name: string;
  /** What it is for: listed in the `agent` tool's description, so a model can choose. */
  description: string;
  /** The file's body, trimmed: the agent's system prompt. */
  system: string;
  model?: string;
  /** Names of the tools it gets; unset gives it every tool it may have. */
  tools?: string[];
  maxSteps?: number;
  budget?: Budget;
  /** A JSON Schema its reply's `result` must match (a typed reply). */
  outputSchema?: Record<string, unknown>;
  /** The file it came from (absolute). */
  file: string;
  /** The 1-based line of each frontmatter field that is set, for messages naming `file:line`. */
  lines: Partial<Record<AgentField, number>>;
}
