import { UsageError } from '../shared/errors.js';

/**
 * What a `--prompt` template of `cohort batch --files` may say about each file: `{path}` (relative
 * to the current folder, `/`-separated), `{name}` (its last part) and `{content}` (its text).
 */
export const PLACEHOLDERS = ['path', 'name', 'content'] as const;

export type Placeholder = (typeof PLACEHOLDERS)[number];

/** A template as parts: literal text and placeholders, in order. */
export interface PromptTemplate {
  readonly parts: readonly (string | { readonly placeholder: Placeholder })[];
  /** The placeholders it uses: `{content}` alone makes the files be read. */
  readonly uses: ReadonlySet<Placeholder>;
}

const KNOWN = `${PLACEHOLDERS.map((name) => `{${name}}`).join(', ')}`;

/**
 * Parses a template once, before any file is looked at, so a mistake stops the batch with exit 2
 * rather than making every task a bad one. `{{` and `}}` are literal braces; any other brace must
 * open or close a known placeholder.
 */
export function parseTemplate(text: string, flag = '--prompt'): PromptTemplate {
  const parts: (string | { placeholder: Placeholder })[] = [];
  const uses = new Set<Placeholder>();
  let literal = '';
  for (let index = 0; index < text.length; index++) {
    const char = text[index];
    const next = text[index + 1];
    if ((char === '{' && next === '{') || (char === '}' && next === '}')) {
      literal += char;
      index++;
      continue;
    }
    if (char === '}') {
      throw new UsageError(
        `Expected \`}}\` for a literal brace in \`${flag}\`, got a lone \`}\` at character ${index + 1}. The placeholders are ${KNOWN}`,
      );
    }
    if (char !== '{') {
      literal += char;
      continue;
    }
    const end = text.indexOf('}', index + 1);
    const name = end === -1 ? undefined : text.slice(index + 1, end);
    if (name === undefined || name.includes('{')) {
      throw new UsageError(
        `Expected a placeholder such as {path} or \`{{\` for a literal brace in \`${flag}\`, got a \`{\` that is not closed at character ${index + 1}. The placeholders are ${KNOWN}`,
      );
    }
    if (!(PLACEHOLDERS as readonly string[]).includes(name)) {
      throw new UsageError(
        `Expected only the placeholders ${KNOWN} in \`${flag}\` (\`{{\` and \`}}\` for literal braces), got \`{${name}}\``,
      );
    }
    if (literal !== '') parts.push(literal);
    literal = '';
    parts.push({ placeholder: name as Placeholder });
    uses.add(name as Placeholder);
    index = end;
  }
  if (literal !== '') parts.push(literal);
  return { parts, uses };
}

/** The prompt for one file: each placeholder replaced by its value, as is. */
export function renderTemplate(
  template: PromptTemplate,
  values: Readonly<Record<Placeholder, string>>,
): string {
  return template.parts
    .map((part) => (typeof part === 'string' ? part : values[part.placeholder]))
    .join('');
}
