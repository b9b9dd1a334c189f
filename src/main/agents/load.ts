import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import {
  type Document,
  isMap,
  isNode,
  isScalar,
  LineCounter,
  type Pair,
  parseDocument,
  type YAMLMap,
} from 'yaml';
import type { Budget } from '../../shared/budget.js';
import { MAX_DURATION_MS, parseDuration } from '../../shared/duration.js';
import { describeValue, UsageError } from '../../shared/errors.js';
import { accepts, nonEmptyString } from '../../shared/option-schema.js';
import { outputSchemaProblem } from '../../shared/tools/output-schema.js';
import { MAX_STEPS } from '../engine-options.js';
import {
  AGENT_FIELDS,
  type AgentDefinition,
  type AgentField,
  AgentFileError,
} from './definition.js';

/** An agent's name and a tool's name share the shape tool modules are held to. */
const NAME_SHAPE = /^[a-zA-Z0-9_-]{1,64}$/;
const NAME_RULE = '1 to 64 of a-z, A-Z, 0-9, _ and -';
/** `description` and `model`. */
const TEXT = nonEmptyString();
const FENCE = /^---[ \t]*$/;
const UNCLOSED =
  'Expected a `---` line closing the frontmatter opened on line 1, got the end of the file';
const EMPTY_BODY =
  'Expected a system prompt after the frontmatter (the file body), got an empty body';
const BUDGET_FIELDS = ['inputTokens', 'outputTokens', 'steps', 'usd', 'time', 'tree'] as const;

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
  const definitions: AgentDefinition[] = [];
  for (const name of names) {
    const file = path.join(folder, name);
    let text: string;
    try {
      if (statSync(file).isDirectory()) continue;
      text = readFileSync(file, 'utf8');
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new AgentFileError(`${file}:1: Expected a readable agent file, got ${reason}`, {
        cause: error,
      });
    }
    definitions.push(parseAgentFile(file, text));
  }
  return definitions;
}

/**
 * Parses one agent file's text: `---`, a YAML mapping of fields, `---`, then the system prompt.
 * `file` is used in messages and stored in the definition. Throws a UsageError for the first
 * problem, prefixed `FILE:LINE: ` so an editor can jump to it.
 */
export function parseAgentFile(file: string, text: string): AgentDefinition {
  const absolute = path.resolve(file);
  const at = (line: number, message: string) =>
    new AgentFileError(`${absolute}:${line}: ${message}`);
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

/** `yamlLines` are the file's lines from its second, up to the closing `---`. */
function readFrontmatter(yamlLines: string[], fileName: string, at: At): Fields {
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
      `Expected the frontmatter to be a YAML mapping of fields (${AGENT_FIELDS.join(', ')}), got ${contents ? show(doc.toJS()) : 'nothing'}`,
    );
  }
  const fields: Partial<Fields> & { lines: Fields['lines'] } = { lines: {} };
  for (const pair of contents.items) {
    const line = lineAt(pairStart(pair));
    const key = isScalar(pair.key) ? pair.key.value : isNode(pair.key) ? pair.key.toJS(doc) : null;
    if (typeof key !== 'string' || !isField(key)) {
      throw at(line, `Expected a known field (${AGENT_FIELDS.join(', ')}), got ${show(key)}`);
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
  switch (key) {
    case 'name':
      if (typeof value !== 'string' || !NAME_SHAPE.test(value)) {
        return problem('name', NAME_RULE, value);
      }
      if (value !== fileName) {
        return problem('name', `\`${fileName}\`, the file name without .md`, value);
      }
      fields.name = value;
      return undefined;
    case 'description':
    case 'model':
      if (!accepts(TEXT, value)) return problem(key, TEXT.expected, value);
      fields[key] = value as string;
      return undefined;
    case 'tools': {
      const tools = toolList(value);
      if (typeof tools === 'string') return tools;
      fields.tools = tools;
      return undefined;
    }
    case 'maxSteps':
      if (!accepts(MAX_STEPS, value)) return problem('maxSteps', MAX_STEPS.expected, value);
      fields.maxSteps = value as number;
      return undefined;
    case 'outputSchema': {
      if (!isRecord(value)) return problem('outputSchema', 'a mapping (a JSON Schema)', value);
      // A fresh Ajv each time: one shared instance would refuse a second schema with the same
      // `$id`, so loading the same folder twice would fail.
      try {
        new Ajv({ allErrors: true, strict: false }).compile(value);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        return `Expected \`outputSchema\` to be a JSON Schema that Ajv compiles, got one Ajv refuses: ${reason}`;
      }
      const unusable = outputSchemaProblem(value);
      if (unusable !== undefined) {
        return `Expected \`outputSchema\` to be usable as a reply's schema, but ${unusable}`;
      }
      fields.outputSchema = value;
      return undefined;
    }
  }
}

/** `tools` as a list, or as one comma-separated string (`read_file, list_files`). */
function toolList(value: unknown): string[] | string {
  const what = `an array of tool names or a comma-separated string of them (each ${NAME_RULE})`;
  let tools: unknown[];
  if (typeof value === 'string') tools = value.split(',').map((tool) => tool.trim());
  else if (Array.isArray(value)) tools = value;
  else return problem('tools', what, value);
  const seen = new Set<string>();
  for (const [index, tool] of tools.entries()) {
    if (typeof tool !== 'string' || !NAME_SHAPE.test(tool)) {
      const entry = tool === '' ? 'an empty entry' : show(tool);
      return `Expected \`tools\` to be ${what}, got ${entry} at position ${index + 1}`;
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
  const known = BUDGET_FIELDS.join(', ');
  if (!isRecord(value)) {
    return {
      problem: `Expected ${where} to be a mapping of limits (${known}), got ${show(value)}`,
    };
  }
  const budget: Budget = {};
  for (const [key, item] of Object.entries(value)) {
    const fail = (what: string) => ({
      problem: `Expected ${nested(where, key)} to be ${what}, got ${show(item)}`,
      key,
    });
    switch (key) {
      case 'inputTokens':
      case 'outputTokens':
      case 'steps':
        if (!isWhole(item, 1, Number.MAX_SAFE_INTEGER)) return fail('a whole number from 1 and up');
        budget[key] = item;
        break;
      case 'usd':
        if (typeof item !== 'number' || !Number.isFinite(item) || item <= 0) {
          return fail('a number of dollars above 0');
        }
        budget.usd = item;
        break;
      case 'time': {
        const ms = budgetTime(item);
        if (ms === undefined) {
          return fail(
            `a duration like 30s, 10m or 1h, or a whole number of milliseconds, from 1 ms to ${MAX_DURATION_MS} ms (about 24.8 days)`,
          );
        }
        budget.timeMs = ms;
        break;
      }
      case 'tree':
        if (typeof item !== 'boolean') return fail('true or false');
        budget.tree = item;
        break;
      default:
        return { problem: `Expected ${where} to have only ${known}, got \`${key}\``, key };
    }
  }
  return { budget };
}

function budgetTime(value: unknown): number | undefined {
  let ms = value;
  try {
    if (typeof value === 'string') ms = parseDuration(value);
  } catch {
    return undefined;
  }
  return isWhole(ms, 1, MAX_DURATION_MS) ? ms : undefined;
}

function isWhole(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
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
  if (!isMap(pair.value)) return undefined;
  const inner = (pair.value as YAMLMap).items.find(
    (item) => isScalar(item.key) && item.key.value === key,
  );
  return inner ? lineAt(pairStart(inner)) : undefined;
}

function pairStart(pair: Pair): number | undefined {
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
  return (AGENT_FIELDS as readonly string[]).includes(key);
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
