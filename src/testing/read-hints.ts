import type { ValueHints } from './schema-value.js';

/** A file an agent read: its path as it asked for it, and the text it got. */
export interface ReadFile {
  path: string;
  text: string;
}

/** What a child had to go on when it replies: its prompt, the files it read, its digest. */
export interface ReadContext {
  prompt: string;
  files: ReadFile[];
  /** The reply the child gives without a schema (a digest of each file, or of the prompt). */
  digest: string;
}

/**
 * Which property names take which fact of what was read, tried in this order on the words of
 * the name (`publishedDate` is `published`, `date`; `author_names` is `author`, `names`).
 */
const RULES: Array<{ words: string[]; fact: Fact }> = [
  { words: ['path', 'paths', 'file', 'files', 'filename', 'filenames', 'source'], fact: 'path' },
  { words: ['author', 'authors', 'creator', 'creators', 'writer', 'writers'], fact: 'authors' },
  { words: ['date', 'dated', 'published', 'created', 'updated', 'modified'], fact: 'date' },
  { words: ['url', 'urls', 'link', 'links', 'href', 'homepage', 'website'], fact: 'url' },
  { words: ['email', 'emails', 'mail'], fact: 'email' },
  { words: ['title', 'heading', 'headline', 'name', 'subject'], fact: 'title' },
  {
    words: [
      'summary',
      'digest',
      'description',
      'abstract',
      'text',
      'content',
      'body',
      'notes',
      'result',
      'answer',
      'overview',
      'review',
      'report',
      'explanation',
      'message',
    ],
    fact: 'digest',
  },
];

type Fact = 'path' | 'authors' | 'date' | 'url' | 'email' | 'title' | 'digest';

const FORMAT_FACTS: Record<string, Fact> = {
  date: 'date',
  'date-time': 'date',
  email: 'email',
  'idn-email': 'email',
  uri: 'url',
  url: 'url',
  iri: 'url',
  'uri-reference': 'url',
  'iri-reference': 'url',
};

const HEADING = /^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$/m;
/** `Authors: A, B`, `- author: A`, `Written by - A`, or a byline `By A and B, 1950.`. */
const AUTHOR_LINE =
  /^[ \t>*-]*(?:(?:[Aa]uthors?|AUTHORS?|[Bb]y|BY|[Ww]ritten [Bb]y|[Cc]reators?)[ \t]*[:=\-–—]|[Bb]y[ \t]+(?=\p{Lu}))[ \t]*(.+?)[ \t]*$/mu;
const DATE =
  /\b(\d{4}-\d{2}-\d{2})(?:[Tt ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(Z|[+-]\d{2}:?\d{2})?)?\b/;
const URL_TEXT = /\bhttps?:\/\/[^\s<>"'`)\]]+/;
const EMAIL = /\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b/;
const MAX_TITLE = 120;

/**
 * Hints for a typed reply (schemaValue) from what a child read: a property is matched to one
 * fact by the words of its name, else by its string format, and the value itself (no name) gets
 * the digest. Every fact comes from the first file that has it, so the result is deterministic.
 */
export function readHints(context: ReadContext): ValueHints {
  const facts = new Map<Fact, unknown[]>();
  const factOf = (fact: Fact): unknown[] => {
    let found = facts.get(fact);
    if (found === undefined) {
      found = findFact(fact, context);
      facts.set(fact, found);
    }
    return found;
  };
  return (name, format) => {
    if (name === undefined) return format === undefined ? [context.digest] : formatHint(format);
    const words = nameWords(name);
    const rule = RULES.find((entry) => entry.words.some((word) => words.includes(word)));
    if (rule !== undefined) return factOf(rule.fact);
    return format === undefined ? [] : formatHint(format);
  };

  function formatHint(format: string): unknown[] {
    const fact = FORMAT_FACTS[format];
    return fact === undefined ? [] : factOf(fact);
  }
}

/** `publishedDate`, `published_date`, `published-date` → `published`, `date`. */
function nameWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
}

function findFact(fact: Fact, context: ReadContext): unknown[] {
  const texts = context.files.map((file) => file.text);
  switch (fact) {
    case 'path': {
      const paths = context.files.map((file) => file.path);
      return paths.length === 0 ? [] : [paths[0], paths];
    }
    case 'title':
      return [title(context)];
    case 'digest':
      return [context.digest];
    case 'authors': {
      const authors = firstMatch(texts, AUTHOR_LINE, (match) => splitNames(match[1]!));
      return authors === undefined || authors.length === 0 ? [] : [authors, authors.join(', ')];
    }
    case 'date': {
      const date = firstMatch(texts, DATE, (match) => match);
      if (date === undefined) return [];
      const [whole, day, time, zone] = date;
      const seconds = time !== undefined && time.length === 5 ? `${time}:00` : time;
      const dateTime = `${day}T${seconds ?? '00:00:00'}${zone ?? 'Z'}`;
      return [...new Set([whole, day, dateTime])];
    }
    case 'url': {
      const url = firstMatch(texts, URL_TEXT, (match) => match[0].replace(/[.,;:]+$/, ''));
      return url === undefined ? [] : [url];
    }
    case 'email': {
      const email = firstMatch(texts, EMAIL, (match) => match[0]);
      return email === undefined ? [] : [email];
    }
  }
}

function firstMatch<T>(
  texts: string[],
  pattern: RegExp,
  take: (match: RegExpExecArray) => T,
): T | undefined {
  for (const text of texts) {
    const match = pattern.exec(text);
    if (match !== null) return take(match);
  }
  return undefined;
}

/**
 * `[Ada Lovelace, Charles Babbage]`, `Ada Lovelace and Charles Babbage, 1843.` → the two names
 * (a part without a letter, such as a year, is not a name).
 */
function splitNames(list: string): string[] {
  return list
    .replace(/^\[|\]$/g, '')
    .split(/\s*(?:,|;|&|\band\b)\s*/)
    .map((name) => name.replace(/^["']|["'.]$/g, '').trim())
    .filter((name) => /\p{L}/u.test(name));
}

/**
 * The title of the first file read that has one (a `title:` in its front matter, else its first
 * Markdown heading), else the first line of the first file (past any front matter), else the
 * prompt's first line.
 */
function title(context: ReadContext): string {
  for (const file of context.files) {
    const { front, body } = frontMatter(file.text);
    const found = FRONT_TITLE.exec(front)?.[1] ?? HEADING.exec(body)?.[1];
    const clean = found?.trim().replace(/^["']|["']$/g, '');
    if (clean !== undefined && clean !== '') return clipTitle(clean);
  }
  const texts = [...context.files.map((file) => frontMatter(file.text).body), context.prompt];
  for (const text of texts) {
    const line = text.split('\n').find((entry) => entry.trim() !== '');
    if (line !== undefined) return clipTitle(line.trim());
  }
  return clipTitle(context.prompt.trim());
}

const FRONT_TITLE = /^title[ \t]*:[ \t]*(.+?)[ \t]*$/im;

/** A leading `---` block (YAML front matter) apart from the rest of the text. */
function frontMatter(text: string): { front: string; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(text);
  return match === null
    ? { front: '', body: text }
    : { front: match[1]!, body: text.slice(match[0].length) };
}

function clipTitle(text: string): string {
  return text.length > MAX_TITLE ? `${text.slice(0, MAX_TITLE - 3)}...` : text;
}
