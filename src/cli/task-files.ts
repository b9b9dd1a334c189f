import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { glob, isDynamicPattern } from 'tinyglobby';
import { UsageError } from '../shared/errors.js';
import { defined, wholeNumber } from '../shared/option-schema.js';
import type { CliFlag } from './flags.js';
import { readFailure } from './input.js';
import { type Placeholder, type PromptTemplate, renderTemplate } from './prompt-template.js';
import type { TaskLineError } from './task-lines.js';

/** `--max-content`'s default: 100 KB of one file's text in a prompt. */
export const DEFAULT_MAX_CONTENT = 100 * 1024;

export const FILES_FLAG: CliFlag = {
  flag: '--files',
  arg: 'GLOB',
  type: 'array',
  help: 'one task per file matching GLOB (repeatable; quote it), instead of\nTASKS.jsonl: its id is the path relative to this folder',
};
export const PROMPT_FLAG: CliFlag = {
  flag: '--prompt',
  arg: 'TEMPLATE',
  help: "with --files: each task's prompt, with {path}, {name}, {content}\n({{ and }} for braces); @FILE reads it from a file",
};
export const SYSTEM_FLAG: CliFlag = {
  flag: '--system',
  arg: 'TEXT',
  help: 'with --files: every task\'s "system"',
};
export const AGENT_FLAG: CliFlag = {
  flag: '--agent',
  arg: 'NAME',
  help: 'with --files: every task\'s "agent" (an agent file in --agents)',
};
export const OUTPUT_SCHEMA_FLAG: CliFlag = {
  flag: '--output-schema',
  arg: 'FILE',
  help: 'with --files: a JSON Schema file, every task\'s "outputSchema"',
};
export const MAX_CONTENT_FLAG = wholeNumber(1, 256 * 1024 * 1024, {
  flag: '--max-content',
  arg: 'BYTES',
  help: `with --files: the largest file {content} takes (default ${DEFAULT_MAX_CONTENT});\na larger one is a bad task`,
});
export const PRINT_TASKS_FLAG: CliFlag = {
  flag: '--print-tasks',
  help: 'write the checked task lines to stdout as JSONL and run nothing\n(no --out needed)',
};

/** The flags that make tasks from files, in the order the batch help lists them. */
export const FILES_FLAGS: readonly CliFlag[] = [
  FILES_FLAG,
  PROMPT_FLAG,
  SYSTEM_FLAG,
  AGENT_FLAG,
  OUTPUT_SCHEMA_FLAG,
  MAX_CONTENT_FLAG,
  PRINT_TASKS_FLAG,
];

/** What every task made from a file gets. */
export interface FilesSpec {
  /** The glob patterns, relative to `cwd` or absolute. */
  patterns: readonly string[];
  template: PromptTemplate;
  system?: string | undefined;
  agent?: string | undefined;
  outputSchema?: Record<string, unknown> | undefined;
  /** The largest file `{content}` takes, in bytes. */
  maxContent: number;
  /** Files cohort writes for this batch (its results file, journals): never tasks. */
  excluded: (absolute: string) => boolean;
  cwd: string;
}

/** The tasks made from the files: one JSON line per file, '' for a file refused. */
export interface FileLines {
  /** The matched paths, relative to `cwd`, sorted: line N is `paths[N - 1]`. */
  paths: string[];
  lines: string[];
  errors: TaskLineError[];
}

/**
 * One task line per file the patterns match, in path order. A pattern that matches nothing is a
 * usage error (exit 2): a typo would otherwise run an empty batch. A file `{content}` cannot take
 * (over the cap, binary, unreadable) is a bad line, with its number, as a bad line of a tasks
 * file is: the other files run, and `--strict` refuses to start.
 */
export async function fileLines(spec: FilesSpec): Promise<FileLines> {
  const found = new Set<string>();
  for (const pattern of spec.patterns) {
    const matched = (await matchPattern(pattern, spec.cwd)).filter((file) => !spec.excluded(file));
    if (matched.length === 0) {
      throw new UsageError(
        `Expected \`--files\` to match at least one file, got none for \`${pattern}\` in ${spec.cwd} (a pattern is relative to that folder; * skips names that start with a dot)`,
      );
    }
    for (const file of matched) found.add(file);
  }
  const paths = [...found].map((file) => relativePath(spec.cwd, file)).sort();
  const lines: string[] = [];
  const errors: TaskLineError[] = [];
  paths.forEach((relative, index) => {
    const read = spec.template.uses.has('content')
      ? readContent(path.resolve(spec.cwd, relative), spec.maxContent)
      : { ok: true as const, text: '' };
    if (!read.ok) {
      lines.push('');
      errors.push({ line: index + 1, message: read.message });
      return;
    }
    const values: Record<Placeholder, string> = {
      path: relative,
      name: path.posix.basename(relative),
      content: read.text,
    };
    const task = defined({
      id: relative,
      prompt: renderTemplate(spec.template, values),
      system: spec.system,
      agent: spec.agent,
      outputSchema: spec.outputSchema,
    });
    lines.push(JSON.stringify(task));
  });
  return { paths, lines, errors };
}

/**
 * The absolute paths of the files one pattern matches. The pattern's leading parts that hold no
 * glob (`../notes/`, `/srv/docs/`) become the folder searched: tinyglobby searches below its `cwd`
 * and misses files under a pattern that climbs out of it.
 */
async function matchPattern(pattern: string, cwd: string): Promise<string[]> {
  const segments = pattern.split('/');
  let fixed = 0;
  while (fixed < segments.length - 1 && !isDynamicPattern(segments[fixed] as string)) fixed++;
  const base = path.resolve(cwd, segments.slice(0, fixed).join('/') || '.');
  const rest = segments.slice(fixed).join('/');
  return glob(rest, {
    cwd: base,
    absolute: true,
    onlyFiles: true,
    dot: false,
    expandDirectories: false,
  });
}

/** A path relative to `cwd` with `/` between its parts, whatever the system: a task's stable id. */
function relativePath(cwd: string, file: string): string {
  return path.relative(cwd, file).split(path.sep).join('/');
}

type Content = { ok: true; text: string } | { ok: false; message: string };

/** A file's text for `{content}`: a regular file of at most `max` bytes, of UTF-8 text. */
function readContent(file: string, max: number): Content {
  let buffer: Buffer;
  try {
    const info = statSync(file);
    if (!info.isFile()) return { ok: false, message: 'expected a regular file, got another kind' };
    if (info.size > max) {
      return {
        ok: false,
        message: `expected a file of at most ${max} bytes for {content} (--max-content), got ${info.size} bytes`,
      };
    }
    buffer = readFileSync(file);
  } catch (error) {
    return { ok: false, message: `expected a readable file, got ${readFailure(error)}` };
  }
  // Checked again: the file may have grown between the two calls.
  if (buffer.length > max) {
    return {
      ok: false,
      message: `expected a file of at most ${max} bytes for {content} (--max-content), got ${buffer.length} bytes`,
    };
  }
  const nul = buffer.indexOf(0);
  if (nul !== -1) {
    return {
      ok: false,
      message: `expected text for {content}, got a binary file (a NUL byte at offset ${nul})`,
    };
  }
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(buffer) };
  } catch {
    return {
      ok: false,
      message: 'expected UTF-8 text for {content}, got bytes that are not UTF-8',
    };
  }
}

/** The batch help's paragraph on `--files`. */
export const FILES_USAGE = `With --files GLOB (instead of TASKS.jsonl), each file the glob matches is one task: its id is
its path relative to this folder, with / between the parts (run from the same folder to resume),
and its prompt is --prompt TEMPLATE with {path} (that path), {name} (the file's name) and
{content} (its UTF-8 text, at most --max-content bytes) put in; {{ and }} are literal braces.
--system, --agent and --output-schema FILE go into every task. * skips names that start with a
dot; --out and the files cohort writes beside it are never tasks. A glob that matches nothing, or
an unknown placeholder, is a usage error; a file {content} cannot take (too large, binary, not
UTF-8, unreadable) is a bad task, reported with its number and path, like a bad line.
--print-tasks writes the tasks as JSONL instead of running them.`;
