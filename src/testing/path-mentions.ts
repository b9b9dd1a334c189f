/**
 * The files and folders a prompt names, for the default policy (docs/SCRIPTED-MODEL.md, "Paths a
 * prompt names"). The scripted model cannot see the workspace, so these are only candidates: the
 * policy asks its tools which exist (`list_files`, or a `read_file` that fails) and uses those.
 */
export interface NamedPath {
  /** Relative to the workspace, as written, without `./` or a trailing `/`. */
  path: string;
  /** In backticks: named on purpose, so a read that fails is reported, not passed over. */
  quoted: boolean;
  /**
   * `file` when its last segment has an extension (`README.md`): read as it is. `folder`
   * otherwise, or with a trailing `/` (`src/main`): listed with everything under it. `glob` when
   * it holds a `*` (`src/*.ts`): listed as it is.
   */
  kind: 'file' | 'folder' | 'glob';
}

/** Paths taken from one prompt at most; more are passed over. */
export const MAX_NAMED_PATHS = 16;

/** A backtick span, or a run of anything else that is not white space. */
const TOKEN = /`([^`\n]*)`|[^\s`]+/g;
/** Letters, digits and `_ . - / + *`: no `:` (URLs), `@` (addresses), quotes or brackets. */
const PATH_CHARACTERS = /^[\p{L}\p{N}_.\-/+*]+$/u;
/** Punctuation around a word in prose: `(see src/main).` is `src/main`. */
const LEADING = /^[("'<[]+/;
const TRAILING = /[)"'>\].,;:!?]+$/;
/** A last segment with an extension: a stem, a dot, then a letter and up to 9 more. */
const EXTENSION = /^(.+)\.[A-Za-z][A-Za-z0-9]{0,9}$/;

/**
 * The paths `prompt` names outside fenced code blocks, in order of mention, each once, at most
 * MAX_NAMED_PATHS. A word in backticks is a path when it has no white space and only path
 * characters; a plain word must also look like one: hold a `/` (`src/main`, `docs/`), or end in
 * an extension after a stem of two characters or more (`README.md`, `*.ts`; not `e.g.`).
 * Neither may be absolute, start with `-`, step out with `..`, or lack a letter (`1/2`).
 */
export function namedPaths(prompt: string): NamedPath[] {
  const found: NamedPath[] = [];
  // A fenced block quotes code or a document: the paths it mentions are not the task's.
  const prose = prompt.replace(
    /^ {0,3}(`{3,}|~{3,})[^\n]*\n[\s\S]*?(?:^ {0,3}\1[ \t]*$|(?![\s\S]))/gm,
    '',
  );
  for (const match of prose.matchAll(TOKEN)) {
    const quoted = match[1] !== undefined;
    const word = quoted ? match[1]! : match[0].replace(LEADING, '').replace(TRAILING, '');
    const named = pathOf(word, quoted);
    if (named === undefined || found.some((entry) => entry.path === named.path)) continue;
    found.push(named);
    if (found.length >= MAX_NAMED_PATHS) break;
  }
  return found;
}

function pathOf(word: string, quoted: boolean): NamedPath | undefined {
  if (word === '' || /\s/.test(word)) return undefined;
  const trailingSlash = word.endsWith('/');
  const path = word.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
  if (path === '' || !PATH_CHARACTERS.test(path) || /^[-/]/.test(path)) return undefined;
  const segments = path.split('/');
  if (segments.some((segment) => segment === '' || segment === '.' || segment === '..')) {
    return undefined;
  }
  if (!/\p{L}/u.test(path)) return undefined;
  const stem = EXTENSION.exec(segments.at(-1)!)?.[1];
  if (!quoted) {
    const looksLikeFile = stem !== undefined && (stem.length >= 2 || stem.includes('*'));
    if (!path.includes('/') && !trailingSlash && !looksLikeFile) return undefined;
  }
  const kind = path.includes('*')
    ? 'glob'
    : trailingSlash || stem === undefined
      ? 'folder'
      : 'file';
  return { path, quoted, kind };
}

/**
 * One `list_files` pattern for `paths`: a file or glob as it is, a folder as itself and
 * everything under it (`{src/main,src/main/**}`, which also finds a file of that name).
 */
export function listPattern(paths: NamedPath[]): string {
  const entries = paths.flatMap((entry) =>
    entry.kind === 'folder' ? [entry.path, `${entry.path}/**`] : [entry.path],
  );
  return entries.length === 1 ? entries[0]! : `{${entries.join(',')}}`;
}
