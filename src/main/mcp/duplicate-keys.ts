/**
 * The first key that appears twice in one object of a JSON text, with the path of that object,
 * or undefined. `JSON.parse` keeps the last of two equal keys without a word: two MCP servers of
 * one name would silently become one. Call it on text `JSON.parse` accepted.
 */
export function duplicateKey(text: string): { path: string[]; key: string } | undefined {
  // One frame per open object or array: an object's keys so far and the key being read.
  const frames: { keys?: Set<string>; key?: string }[] = [];
  // The keys of the objects around the innermost one: where a duplicate was found.
  const path = (): string[] =>
    frames.slice(0, -1).flatMap((frame) => (frame.key === undefined ? [] : [frame.key]));
  let index = 0;
  while (index < text.length) {
    const char = text[index];
    if (char === '"') {
      const end = stringEnd(text, index);
      const top = frames.at(-1);
      if (top?.keys && nextNonSpace(text, end) === ':') {
        const key = JSON.parse(text.slice(index, end)) as string;
        if (top.keys.has(key)) return { path: path(), key };
        top.keys.add(key);
        top.key = key;
      }
      index = end;
      continue;
    }
    if (char === '{') frames.push({ keys: new Set() });
    else if (char === '[') frames.push({});
    else if (char === '}' || char === ']') frames.pop();
    index++;
  }
  return undefined;
}

/** The index just past the string that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let index = start + 1;
  while (index < text.length && text[index] !== '"') index += text[index] === '\\' ? 2 : 1;
  return index + 1;
}

function nextNonSpace(text: string, from: number): string | undefined {
  let index = from;
  while (index < text.length && /\s/.test(text[index] ?? '')) index++;
  return text[index];
}
