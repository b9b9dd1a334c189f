/**
 * A string that a JSON Schema `pattern` (a regular expression, as Ajv compiles it: with the `u`
 * flag) matches, made by walking the expression: the first alternative of each choice, the
 * fewest repetitions a quantifier allows (or `stretch` of them, to reach a `minLength`), and the
 * first character of each class. Lookarounds and word boundaries are skipped, so an expression
 * that leans on them may not match what this makes; the caller tests the result with the
 * expression itself and falls back when it does not. Undefined when the pattern does not parse.
 */
export function patternString(pattern: string, stretch = 0): string | undefined {
  try {
    new RegExp(pattern, 'u');
  } catch {
    return undefined;
  }
  const walker = new Walker(pattern, stretch);
  try {
    const text = walker.alternation();
    return walker.done() ? text : undefined;
  } catch {
    return undefined;
  }
}

/** Characters tried, in order, for a negated class or a class of escapes: plain ones first. */
const FALLBACK_CHARACTERS = 'a0A_-. xzZ9!@#:/';

/** How many times an unbounded quantifier repeats at most when stretched. */
const MAX_STRETCH = 256;

class Walker {
  #at = 0;
  readonly #groups: string[] = [];

  constructor(
    readonly source: string,
    readonly stretch: number,
  ) {}

  done(): boolean {
    return this.#at >= this.source.length;
  }

  /** Where the text goes on after the next `char`; a pattern that compiled always has one. */
  #after(char: string): number {
    const at = this.source.indexOf(char, this.#at);
    if (at === -1) throw new Error(`expected ${char} after ${this.#at}`);
    return at + 1;
  }

  #peek(): string | undefined {
    return this.source[this.#at];
  }

  /** alternative ('|' alternative)*: the first alternative is made, the others skipped. */
  alternation(): string {
    const first = this.#sequence();
    while (this.#peek() === '|') {
      this.#at++;
      this.#sequence();
    }
    return first;
  }

  #sequence(): string {
    let text = '';
    for (;;) {
      const next = this.#peek();
      if (next === undefined || next === '|' || next === ')') return text;
      const atom = this.#atom();
      text += this.#quantified(atom);
    }
  }

  /** An atom as a maker: a quantifier may call it several times. */
  #atom(): () => string {
    const char = this.source[this.#at++]!;
    switch (char) {
      case '^':
      case '$':
        return () => '';
      case '.':
        return () => 'a';
      case '[': {
        const made = this.#characterClass();
        return () => made;
      }
      case '(':
        return this.#group();
      case '\\':
        return this.#escape();
      default:
        return () => char;
    }
  }

  #group(): () => string {
    let capturing = true;
    let lookaround = false;
    if (this.#peek() === '?') {
      this.#at++;
      const kind = this.source[this.#at++];
      capturing = false;
      if (kind === '=' || kind === '!') lookaround = true;
      else if (kind === '<') {
        const after = this.#peek();
        if (after === '=' || after === '!') {
          this.#at++;
          lookaround = true;
        } else {
          capturing = true;
          this.#at = this.#after('>');
        }
      }
    }
    const index = this.#groups.length;
    if (capturing) this.#groups.push('');
    const start = this.#at;
    const made = this.alternation();
    if (this.source[this.#at++] !== ')') throw new Error(`unclosed group at ${start}`);
    if (lookaround) return () => '';
    if (capturing) this.#groups[index] = made;
    return () => made;
  }

  #escape(): () => string {
    const char = this.source[this.#at++]!;
    const classes: Record<string, string> = { d: '0', D: 'a', w: 'a', W: '-', s: ' ', S: 'a' };
    if (char in classes) return () => classes[char]!;
    if (char === 'b' || char === 'B') return () => '';
    if (/[1-9]/.test(char)) {
      const group = Number(char) - 1;
      return () => this.#groups[group] ?? '';
    }
    if (char === 'k' && this.#peek() === '<') {
      this.#at = this.#after('>');
      return () => '';
    }
    const literal = this.#escapedLiteral(char);
    return () => literal;
  }

  /** The character an escape inside or outside a class stands for (`\n`, `\u0041`, `\.`). */
  #escapedLiteral(char: string): string {
    const controls: Record<string, string> = {
      n: '\n',
      r: '\r',
      t: '\t',
      f: '\f',
      v: '\v',
      0: '\0',
    };
    if (char in controls) return controls[char]!;
    if (char === 'x') return this.#hex(2);
    if (char === 'u') {
      if (this.#peek() === '{') {
        const end = this.#after('}') - 1;
        const code = Number.parseInt(this.source.slice(this.#at + 1, end), 16);
        this.#at = end + 1;
        return String.fromCodePoint(code);
      }
      return this.#hex(4);
    }
    if (char === 'p' || char === 'P') {
      // A Unicode property: a letter is the likeliest fit of what such patterns ask for.
      this.#at = this.#after('}');
      return char === 'p' ? 'a' : '0';
    }
    if (char === 'c') return String.fromCharCode(this.source.charCodeAt(this.#at++) % 32);
    return char;
  }

  #hex(digits: number): string {
    const code = Number.parseInt(this.source.slice(this.#at, this.#at + digits), 16);
    this.#at += digits;
    return String.fromCharCode(code);
  }

  /** `[...]`: its first member, or for `[^...]` the first plain character it leaves out. */
  #characterClass(): string {
    const negated = this.#peek() === '^';
    if (negated) this.#at++;
    const members: Array<(char: string) => boolean> = [];
    let first: string | undefined;
    // With the `u` flag a `]` always closes a class (`[]` matches nothing), so no special case.
    while (this.#peek() !== ']') {
      if (this.#peek() === undefined) throw new Error('unclosed class');
      const low = this.#classCharacter(members);
      if (low === undefined) continue;
      if (this.#peek() === '-' && this.source[this.#at + 1] !== ']') {
        this.#at++;
        const high = this.#classCharacter(members) ?? low;
        const [lowCode, highCode] = [low.codePointAt(0)!, high.codePointAt(0)!];
        members.push((char) => {
          const code = char.codePointAt(0)!;
          return code >= lowCode && code <= highCode;
        });
      } else members.push((char) => char === low);
      first ??= low;
    }
    this.#at++;
    if (!negated) {
      if (first !== undefined) return first;
      return [...FALLBACK_CHARACTERS].find((char) => members.some((test) => test(char))) ?? 'a';
    }
    return [...FALLBACK_CHARACTERS].find((char) => !members.some((test) => test(char))) ?? '~';
  }

  /** One member of a class: a character, or for `\d`-like escapes a test added to `members`. */
  #classCharacter(members: Array<(char: string) => boolean>): string | undefined {
    const char = this.source[this.#at++]!;
    if (char !== '\\') return char;
    const escaped = this.source[this.#at++]!;
    const tests: Record<string, (char: string) => boolean> = {
      d: (c) => /\d/.test(c),
      D: (c) => /\D/.test(c),
      w: (c) => /\w/.test(c),
      W: (c) => /\W/.test(c),
      s: (c) => /\s/.test(c),
      S: (c) => /\S/.test(c),
    };
    const test = tests[escaped];
    if (test !== undefined) {
      members.push(test);
      return undefined;
    }
    if (escaped === 'b') return '\b';
    return this.#escapedLiteral(escaped);
  }

  #quantified(atom: () => string): string {
    const { min, max } = this.#quantifier();
    const count = max === min ? min : Math.min(max, Math.max(min, this.stretch));
    let text = '';
    for (let index = 0; index < count; index++) text += atom();
    return text;
  }

  #quantifier(): { min: number; max: number } {
    const char = this.#peek();
    let bounds = { min: 1, max: 1 };
    if (char === '?') bounds = { min: 0, max: 1 };
    else if (char === '*') bounds = { min: 0, max: MAX_STRETCH };
    else if (char === '+') bounds = { min: 1, max: MAX_STRETCH };
    else if (char === '{') {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.#at));
      if (match === null) return bounds;
      const min = Number(match[1]);
      const max =
        match[2] === undefined ? min : match[3] === '' ? min + MAX_STRETCH : Number(match[3]);
      this.#at += match[0].length;
      if (this.#peek() === '?') this.#at++;
      return { min, max };
    } else return bounds;
    this.#at++;
    if (this.#peek() === '?') this.#at++;
    return bounds;
  }
}
