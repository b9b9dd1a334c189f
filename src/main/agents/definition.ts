import type { Budget } from '../../shared/budget.js';
import { UsageError } from '../../shared/errors.js';
import { custom, type Fields, nonEmptyString } from '../../shared/option-schema.js';
import type { CacheMode, CacheTtl } from '../../shared/provider/cache.js';
import { AGENT_FIELDS, MAX_STEPS } from '../engine-options.js';

/**
 * A malformed agent file: the message starts with `FILE:LINE: `. Its field names are the file's
 * own, so the CLI shows it as it is (never rewritten to flag names).
 */
export class AgentFileError extends UsageError {
  /** The file, absolute. */
  readonly file: string;
  /** The 1-based line the problem is on. */
  readonly line: number;
  /** The problem in the file's words, without `FILE:LINE: ` (`Expected …, got …`). */
  readonly problem: string;

  constructor(file: string, line: number, problem: string, options?: { cause?: unknown }) {
    super(`${file}:${line}: ${problem}`, options);
    this.file = file;
    this.line = line;
    this.problem = problem;
  }
}

/**
 * A bad agent file that stopped a start which checks every file of its folder, used or not (an
 * agent may name any of them). The message is the file's, then a line saying how to leave the
 * file out; `otherFolder` is that way in the caller's words (the CLI's names `--agents`).
 */
export class AgentFolderError extends AgentFileError {
  /** The folder the file is in. */
  readonly folder: string;
  /** The file's own error. */
  readonly fileError: AgentFileError;

  constructor(
    fileError: AgentFileError,
    folder: string,
    otherFolder = 'set `agentsDir` to a folder without it',
  ) {
    super(fileError.file, fileError.line, fileError.problem, { cause: fileError });
    this.folder = folder;
    this.fileError = fileError;
    this.message = `${fileError.message}\nEvery agent file in ${folder} is checked before anything starts, used or not, since an agent may name any of them: fix this one, move it out of that folder, or ${otherFolder}`;
  }
}

/** One `NAME.md` of an agent folder: the agent it defines, or why it defines none. */
export type AgentFile =
  | { name: string; file: string; definition: AgentDefinition; error?: undefined }
  | { name: string; file: string; error: AgentFileError; definition?: undefined };

/** An agent's name and a tool's name share the shape tool modules are held to. */
export const NAME_SHAPE = /^[a-zA-Z0-9_-]{1,64}$/;
const NAME_RULE = '1 to 64 of a-z, A-Z, 0-9, _ and -';

const TEXT = nonEmptyString();

/**
 * The frontmatter fields an agent file may have, in the order messages list them. Each field's
 * words are its messages' (``Expected `maxSteps` to be …``); `maxSteps` and `patienceMs` are the
 * spawn options' own fields. Beyond its field, `name` must be the file's name, `tools` may be one
 * comma-separated string, `outputSchema` must compile, and `budget` is checked limit by limit,
 * each pointed at its own line (`load.ts`).
 */
export const AGENT_FILE_FIELDS = {
  name: custom<string>(NAME_RULE, (value) => typeof value === 'string' && NAME_SHAPE.test(value)),
  description: TEXT,
  model: TEXT,
  /** A list, or one comma-separated string (`read_file, list_files`), each entry a name. */
  tools: custom<string[]>(
    `an array of tool names or a comma-separated string of them (each ${NAME_RULE}, or \`mcp__SERVER__*\`)`,
    (value) => typeof value === 'string' || Array.isArray(value),
  ),
  maxSteps: MAX_STEPS,
  budget: custom<Budget>('a mapping of limits', isMapping),
  outputSchema: custom<Record<string, unknown>>('a mapping (a JSON Schema)', isMapping),
  patienceMs: AGENT_FIELDS.patienceMs,
  /** Its wall-clock limit in ms from its spawn (`AgentOptions.timeout`). */
  timeout: AGENT_FIELDS.timeout,
  cache: AGENT_FIELDS.cache,
  cacheTtl: AGENT_FIELDS.cacheTtl,
} as const satisfies Fields;

export type AgentField = keyof typeof AGENT_FILE_FIELDS;

function isMapping(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
  /** How long one of its requests may keep being refused (429/529) before it fails, in ms. */
  patienceMs?: number;
  /** Its wall-clock limit in ms from its spawn: past it, it is cancelled `timeout`. */
  timeout?: number;
  /** Its prompt-cache breakpoints and its shared prefix's lifetime (docs/CACHING.md). */
  cache?: CacheMode;
  cacheTtl?: CacheTtl;
  /** The file it came from (absolute). */
  file: string;
  /** The 1-based line of each frontmatter field that is set, for messages naming `file:line`. */
  lines: Partial<Record<AgentField, number>>;
}
