import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Document, Pair, YAMLMap } from 'yaml';
import type { Budget } from '../../shared/budget.js';
import { BUDGET_FIELDS } from '../../shared/budget-meter.js';
import { MAX_DURATION_MS, parseDuration } from '../../shared/duration.js';
import { describeValue, UsageError } from '../../shared/errors.js';
import {
  accepts,
  custom,
  type Field,
  type Fields as OptionFields,
} from '../../shared/option-schema.js';
import { outputSchemaProblem, schemaAjv } from '../../shared/tools/output-schema.js';
import { isMcpToolName, isServerPattern } from '../../shared/tools/selection.js';
import {
  AGENT_FILE_FIELDS,
  type AgentDefinition,
  type AgentField,
  type AgentFile,
  AgentFileError,
  NAME_SHAPE,
} from './definition.js';

/** The field names, as messages list them. */
const FIELD_NAMES = Object.keys(AGENT_FILE_FIELDS).join(', ');
const FENCE = /^---[ \t]*$/;
const UNCLOSED =
  'Expected a `---` line closing the frontmatter opened on line 1, got the end of the file';
const EMPTY_BODY =
  'Expected a system prompt after the frontmatter (the file body), got an empty body';
/**
 * A budget as data (agent files, task lines, `--budget`): the library's fields, with `time` a
 * duration (`10m`) or whole milliseconds in place of `timeMs`, in the order messages list them.
 */
const BUDGET_DATA_FIELDS = {
  inputTokens: BUDGET_FIELDS.inputTokens,
  outputTokens: BUDGET_FIELDS.outputTokens,
  steps: BUDGET_FIELDS.steps,
  usd: { ...BUDGET_FIELDS.usd, expected: 'a number of dollars above 0' },
  time: custom<string | number>(
    `a duration like 30s, 10m or 1h, or a whole number of milliseconds, from 1 ms to ${MAX_DURATION_MS} ms (about 24.8 days)`,
    (value) => budgetTime(value) !== undefined,
  ),
  tree: BUDGET_FIELDS.tree,
} as const satisfies OptionFields;

/**
 * Loads every `*.md` file of `dir` (not recursive), in name order. A missing folder is an error
 * only when `required` (the caller named it); one that exists and is not a folder always is.
 * Dot-files are skipped, as editors leave them beside the files they edit. The first bad file
 * throws, so a folder is loaded whole or not at all.
 */
export function loadAgentDefinitions(
  dir: string,
  options: { required: boolean },
): AgentDefinition[] {
  return loadAgentFolder(dir, options).map((entry) => {
    if (entry.error) throw entry.error;
    return entry.definition;
  });
}

/**
 * Reads every `*.md` file of `dir` as `loadAgentDefinitions` does, but a bad file does not throw:
 * its entry holds its error, so a caller can use the good ones and refuse only what names a bad
 * one (a batch), or report each file (`cohort agents check`). The folder itself being missing
 * (when `required`), not a folder or unreadable still throws a UsageError.
 */
export function loadAgentFolder(dir: string, options: { required: boolean }): AgentFile[] {
  const folder = path.resolve(dir);
  let isFolder: boolean;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch (error) {
    if (!isMissing(error)) throw notAFolder(folder, `which cannot be read (${reasonOf(error)})`);
    if (!options.required) return [];
    throw notAFolder(folder, 'which does not exist');
  }
  if (!isFolder) throw notAFolder(folder, 'which is not a folder');
  let entries: string[];
  try {
    entries = readdirSync(folder);
  } catch (error) {
    throw notAFolder(folder, `which cannot be listed (${reasonOf(error)})`);
  }
  const names = entries.filter((name) => name.endsWith('.md') && !name.startsWith('.')).sort();
  const files: AgentFile[] = [];
  for (const fileName of names) {
    const file = path.join(folder, fileName);
    const name = fileName.replace(/\.md$/, '');
    let text: string;
    try {
      if (statSync(file).isDirectory()) continue;
      text = readFileSync(file, 'utf8');
    } catch (error) {
      const problem = `Expected a readable agent file, got ${reasonOf(error)}`;
      files.push({ name, file, error: new AgentFileError(file, 1, problem, { cause: error }) });
      continue;
    }
    try {
      files.push({ name, file, definition: parseAgentFile(file, text) });
    } catch (error) {
      if (!(error instanceof AgentFileError)) throw error;
      files.push({ name, file, error });
    }
  }
  return files;
}

/**
 * Parses one agent file's text: `---`, a YAML mapping of fields, `---`, then the system prompt.
 * `file` is used in messages and stored in the definition. Throws a UsageError for the first
 * problem, prefixed `FILE:LINE: ` so an editor can jump to it.
 */
export function parseAgentFile(file: string, text: string): AgentDefinition {
  const absolute = path.resolve(file);
  const at = (line: number, message: string) => new AgentFileError(absolute, line, message);
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  if (!FENCE.test(lines[0] ?? '')) {
    const got = text.trim() === '' ? 'an empty file' : show(lines[0]);
    throw at(
      1,
      `Expected the file to start with a \`---\` line opening its YAML frontmatter, got ${got}`,
    );
  }
  const close = lines.findIndex((line, index) => index > 0 && FENCE.test(line));
  if (close === -1) throw at(1, UNCLOSED);
  const fileName = path.basename(absolute).replace(/\.md$/, '');
  const definition = readFrontmatter(lines.slice(1, close), fileName, at);
  const system = lines
    .slice(close + 1)
    .join('\n')
    .trim();
  if (system === '') throw at(close + 1, EMPTY_BODY);
  return { ...definition, system, file: absolute };
}

/**
 * Checks a budget given as JSON or YAML data, the form agent files and task lines use: `time` is
 * a duration (`10m`) or whole milliseconds, and becomes `timeMs`. `where` names the value in
 * messages, e.g. `` `budget` ``.
 */
export function budgetFromData(value: unknown, where: string): Budget {
  const checked = checkBudget(value, where);
  if ('problem' in checked) throw new UsageError(checked.problem);
  return checked.budget;
}

type Fields = Omit<AgentDefinition, 'system' | 'file'>;
type At = (line: number, message: string) => UsageError;
type Yaml = typeof import('yaml');

let yamlModule: Yaml | undefined;

/**
 * The YAML parser, loaded with the first frontmatter read: most commands read no agent file,
 * and importing it costs every CLI process about 40 ms of CPU at start.
 */
function yaml(): Yaml {
  yamlModule ??= createRequire(import.meta.url)('yaml') as Yaml;
  return yamlModule;
}

/** `yamlLines` are the file's lines from its second, up to the closing `---`. */
function readFrontmatter(yamlLines: string[], fileName: string, at: At): Fields {
  const { isMap, isNode, isScalar, LineCounter, parseDocument } = yaml();
  const lineCounter = new LineCounter();
  const doc = parseDocument(yamlLines.join('\n'), {
    lineCounter,
    prettyErrors: false,
    uniqueKeys: true,
  });
  // The YAML starts on the file's second line, after the opening `---`. An error found only at
  // the end (an unclosed quote or bracket) is shown on the last YAML line, not the fence.
  const lineAt = (offset: number | undefined) =>
    Math.min(lineCounter.linePos(offset ?? 0).line + 1, yamlLines.length + 1);
  const yamlError = doc.errors[0];
  if (yamlError) {
    const line = lineAt(yamlError.pos[0]);
    const duplicate = yamlError.code === 'DUPLICATE_KEY' ? duplicateKey(doc, line, lineAt) : '';
    throw at(
      line,
      duplicate || `Expected valid YAML in the frontmatter, got: ${yamlError.message}`,
    );
  }
  const contents = doc.contents;
  if (!isMap(contents)) {
    throw at(
      contents ? lineAt(contents.range?.[0]) : 1,
      `Expected the frontmatter to be a YAML mapping of fields (${FIELD_NAMES}), got ${contents ? show(doc.toJS()) : 'nothing'}`,
    );
  }
  const fields: Partial<Fields> & { lines: Fields['lines'] } = { lines: {} };
  for (const pair of contents.items) {
    const line = lineAt(pairStart(pair));
    const key = isScalar(pair.key) ? pair.key.value : isNode(pair.key) ? pair.key.toJS(doc) : null;
    if (typeof key !== 'string' || !isField(key)) {
      throw at(line, `Expected a known field (${FIELD_NAMES}), got ${show(key)}`);
    }
    let value: unknown;
    try {
      value = isNode(pair.value) ? pair.value.toJS(doc) : null;
    } catch (error) {
      throw at(line, `Expected \`${key}\` to be plain YAML data, got: ${String(error)}`);
    }
    fields.lines[key] = line;
    if (key === 'budget') {
      const checked = checkBudget(value, '`budget`');
      if ('problem' in checked) {
        const inner = checked.key === undefined ? undefined : keyLine(pair, checked.key, lineAt);
        throw at(inner ?? line, checked.problem);
      }
      fields.budget = checked.budget;
      continue;
    }
    const problem = setField(fields, key, value, fileName);
    if (problem !== undefined) throw at(line, problem);
  }
  for (const key of ['name', 'description'] as const) {
    if (fields[key] === undefined) {
      const what =
        key === 'name' ? `\`${fileName}\` (the file name without .md)` : 'a non-empty string';
      throw at(1, `Expected the frontmatter to set \`${key}\` to ${what}, got nothing`);
    }
  }
  return fields as Fields;
}

/** Checks one field's value and sets it; returns the problem, if any. */
function setField(
  fields: Partial<Fields>,
  key: Exclude<AgentField, 'budget'>,
  value: unknown,
  fileName: string,
): string | undefined {
  const field: Field = AGENT_FILE_FIELDS[key];
  if (!accepts(field, value)) return problem(key, field.expected, value);
  if (key === 'tools') {
    const tools = toolList(value as string | unknown[]);
    if (typeof tools === 'string') return tools;
    fields.tools = tools;
    return undefined;
  }
  if (key === 'name' && value !== fileName) {
    return problem('name', `\`${fileName}\`, the file name without .md`, value);
  }
  if (key === 'outputSchema') {
    const unusable = schemaProblem(value as Record<string, unknown>);
    if (unusable !== undefined) return unusable;
  }
  (fields as Record<string, unknown>)[key] = value;
  return undefined;
}

/** Why an output schema cannot be a reply's, if it cannot. */
function schemaProblem(schema: Record<string, unknown>): string | undefined {
  // A fresh Ajv each time: one shared instance would refuse a second schema with the same
  // `$id`, so loading the same folder twice would fail.
  try {
    schemaAjv().compile(schema);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return `Expected \`outputSchema\` to be a JSON Schema that Ajv compiles, got one Ajv refuses: ${reason}`;
  }
  const unusable = outputSchemaProblem(schema);
  if (unusable !== undefined) {
    return `Expected \`outputSchema\` to be usable as a reply's schema, but ${unusable}`;
  }
  return undefined;
}

/** Each tool of `tools`, named once; returns the problem, if any. */
function toolList(value: string | unknown[]): string[] | string {
  const tools = typeof value === 'string' ? value.split(',').map((tool) => tool.trim()) : value;
  const seen = new Set<string>();
  for (const [index, tool] of tools.entries()) {
    if (
      typeof tool !== 'string' ||
      !(NAME_SHAPE.test(tool) || isMcpToolName(tool) || isServerPattern(tool))
    ) {
      const entry = tool === '' ? 'an empty entry' : show(tool);
      return `Expected \`tools\` to be ${AGENT_FILE_FIELDS.tools.expected}, got ${entry} at position ${index + 1}`;
    }
    if (seen.has(tool)) return `Expected \`tools\` to name each tool once, got \`${tool}\` twice`;
    seen.add(tool);
  }
  return tools as string[];
}

function checkBudget(
  value: unknown,
  where: string,
): { budget: Budget } | { problem: string; key?: string } {
  const known = Object.keys(BUDGET_DATA_FIELDS).join(', ');
  if (!isRecord(value)) {
    return {
      problem: `Expected ${where} to be a mapping of limits (${known}), got ${show(value)}`,
    };
  }
  const budget: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (!Object.hasOwn(BUDGET_DATA_FIELDS, key)) {
      return { problem: `Expected ${where} to have only ${known}, got \`${key}\``, key };
    }
    const field: Field = BUDGET_DATA_FIELDS[key as keyof typeof BUDGET_DATA_FIELDS];
    if (!accepts(field, item)) {
      return {
        problem: `Expected ${nested(where, key)} to be ${field.expected}, got ${show(item)}`,
        key,
      };
    }
    if (key === 'time') budget.timeMs = budgetTime(item);
    else budget[key] = item;
  }
  return { budget: budget as Budget };
}

function budgetTime(value: unknown): number | undefined {
  let ms = value;
  try {
    if (typeof value === 'string') ms = parseDuration(value);
  } catch {
    return undefined;
  }
  return accepts(BUDGET_FIELDS.timeMs, ms) ? (ms as number) : undefined;
}

/** `` `budget` `` and `usd` give `` `budget.usd` ``; any other `where` gives `` `usd` in WHERE ``. */
function nested(where: string, key: string): string {
  const bare = /^`([^`]+)`$/.exec(where);
  return bare ? `\`${bare[1]}.${key}\`` : `\`${key}\` in ${where}`;
}

function duplicateKey(
  doc: Document,
  line: number,
  lineAt: (offset: number | undefined) => number,
): string {
  const { isMap, isScalar } = yaml();
  if (!isMap(doc.contents)) return '';
  const firstLine = new Map<unknown, number>();
  for (const pair of doc.contents.items) {
    const key = isScalar(pair.key) ? pair.key.value : undefined;
    const seen = firstLine.get(key);
    if (seen !== undefined && lineAt(pairStart(pair)) === line) {
      return `Expected each field once, got ${show(key)} again (first on line ${seen})`;
    }
    if (seen === undefined) firstLine.set(key, lineAt(pairStart(pair)));
  }
  return '';
}

/** The line of `key` inside a mapping field's value (a budget's `usd`). */
function keyLine(
  pair: Pair,
  key: string,
  lineAt: (offset: number | undefined) => number,
): number | undefined {
  const { isMap, isScalar } = yaml();
  if (!isMap(pair.value)) return undefined;
  const inner = (pair.value as YAMLMap).items.find(
    (item) => isScalar(item.key) && item.key.value === key,
  );
  return inner ? lineAt(pairStart(inner)) : undefined;
}

function pairStart(pair: Pair): number | undefined {
  const { isNode } = yaml();
  const node = isNode(pair.key) ? pair.key : isNode(pair.value) ? pair.value : undefined;
  return node?.range?.[0];
}

function problem(name: string, what: string, value: unknown): string {
  return `Expected \`${name}\` to be ${what}, got ${show(value)}`;
}

/** Values come from a document, where quotes tell `"10"` from `10`. */
function show(value: unknown): string {
  return describeValue(value, 120, { quoteStrings: true });
}

function isField(key: string): key is AgentField {
  return Object.hasOwn(AGENT_FILE_FIELDS, key);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function notAFolder(folder: string, what: string): UsageError {
  return new UsageError(
    `Expected \`agentsDir\` to be a folder of agent files (NAME.md), got \`${folder}\`, ${what}`,
  );
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
