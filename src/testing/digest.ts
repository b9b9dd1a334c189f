import { fingerprint } from './hash.js';

const EXPORTED_NAME =
  /^[ \t]*export[ \t]+(?:default[ \t]+)?(?:declare[ \t]+)?(?:abstract[ \t]+)?(?:async[ \t]+)?(?:function\*?|class|const|let|var)[ \t]+([A-Za-z_$][\w$]*)/gm;
const MAX_NAMES = 12;
const MAX_FIRST_LINE = 80;

/** Names of exported functions, classes and variables that a regex finds in source text. */
export function exportedNames(text: string): string[] {
  const names: string[] = [];
  for (const match of text.matchAll(EXPORTED_NAME)) {
    const name = match[1];
    if (name !== undefined && !names.includes(name)) names.push(name);
  }
  return names;
}

function clipLine(line: string): string {
  return line.length > MAX_FIRST_LINE ? `${line.slice(0, MAX_FIRST_LINE - 3)}...` : line;
}

/**
 * A deterministic one-line digest of a file: path, line and character counts, the first
 * non-empty line, exported names, and an FNV-1a fingerprint of the content.
 */
export function digestFile(path: string, text: string): string {
  const lines = text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  const characters = [...text].length;
  const firstLine =
    text
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? '';
  const names = exportedNames(text);
  const shown = names.slice(0, MAX_NAMES).join(', ');
  const more = names.length > MAX_NAMES ? ` (+${names.length - MAX_NAMES} more)` : '';
  return [
    `${path}: ${lines} lines, ${characters} chars`,
    `first line: ${JSON.stringify(clipLine(firstLine))}`,
    `exports: ${names.length === 0 ? 'none' : shown + more}`,
    `fnv1a ${fingerprint(text)}`,
  ].join('; ');
}

/** A deterministic digest of a prompt, for a child with no file to read. */
export function digestPrompt(prompt: string): string {
  const words = prompt.split(/\s+/).filter((word) => word !== '').length;
  const firstLine =
    prompt
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? '';
  return `prompt: ${words} words, ${[...prompt].length} chars; first line: ${JSON.stringify(clipLine(firstLine))}; fnv1a ${fingerprint(prompt)}`;
}
