import { isIPv4, isIPv6 } from 'node:net';

/**
 * The string `format`s the scripted model knows: a fixed sample of each, which a typed reply
 * uses when what it read offers no value of that format, and a check, so a value it read (a date
 * in a file) is used only when it really is one. Formats not listed here constrain nothing, as
 * with Ajv's default, which knows no formats.
 */
interface KnownFormat {
  sample: string;
  check(text: string): boolean;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^([01]\d|2[0-3]):([0-5]\d):([0-5]\d|60)(\.\d+)?(z|[+-]([01]\d|2[0-3]):?[0-5]\d)$/i;
const POINTER_TOKENS = /^(?:\/(?:[^~/]|~0|~1)*)*$/;

function isDate(text: string): boolean {
  const match = DATE.exec(text);
  if (match === null) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return days !== undefined && day >= 1 && day <= days;
}

function isDateTime(text: string): boolean {
  const separator = text.search(/[Tt ]/);
  return separator === 10 && isDate(text.slice(0, 10)) && TIME.test(text.slice(separator + 1));
}

function isHostname(text: string): boolean {
  if (text.length > 253) return false;
  return text
    .replace(/\.$/, '')
    .split('.')
    .every((label) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i.test(label));
}

function isRegex(text: string): boolean {
  try {
    new RegExp(text, 'u');
    return true;
  } catch {
    return false;
  }
}

const URI = /^[a-z][a-z0-9+.-]*:[^\s"<>\\^`{|}]*$/i;
const NO_SPACE = /^[^\s"<>\\^`|]*$/;

const FORMATS: Record<string, KnownFormat> = {
  date: { sample: '2000-01-01', check: isDate },
  time: { sample: '00:00:00Z', check: (text) => TIME.test(text) },
  'date-time': { sample: '2000-01-01T00:00:00Z', check: isDateTime },
  duration: {
    sample: 'P1D',
    check: (text) =>
      /^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$/.test(text),
  },
  email: {
    sample: 'agent@example.com',
    check: (text) => /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/.test(text),
  },
  'idn-email': { sample: 'agent@example.com', check: (text) => /^[^\s@]+@[^\s@]+$/.test(text) },
  hostname: { sample: 'example.com', check: isHostname },
  'idn-hostname': { sample: 'example.com', check: (text) => /^[^\s]+$/.test(text) },
  ipv4: { sample: '192.0.2.1', check: isIPv4 },
  ipv6: { sample: '2001:db8::1', check: isIPv6 },
  uri: { sample: 'https://example.com/', check: (text) => URI.test(text) },
  iri: { sample: 'https://example.com/', check: (text) => /^[a-z][a-z0-9+.-]*:\S*$/i.test(text) },
  url: { sample: 'https://example.com/', check: (text) => URI.test(text) },
  'uri-reference': { sample: 'https://example.com/', check: (text) => NO_SPACE.test(text) },
  'iri-reference': { sample: 'https://example.com/', check: (text) => /^\S*$/.test(text) },
  'uri-template': { sample: 'https://example.com/{id}', check: (text) => /^\S*$/.test(text) },
  uuid: {
    sample: '00000000-0000-4000-8000-000000000000',
    check: (text) => /^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i.test(text),
  },
  'json-pointer': { sample: '/value', check: (text) => POINTER_TOKENS.test(text) },
  'relative-json-pointer': {
    sample: '0',
    check: (text) => /^(0|[1-9]\d*)(#|(?:\/(?:[^~/]|~0|~1)*)*)$/.test(text),
  },
  regex: { sample: '.*', check: isRegex },
  byte: {
    sample: 'AA==',
    check: (text) => /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text),
  },
};

/** The fixed sample of `format`, or undefined for a format the scripted model does not know. */
export function formatSample(format: unknown): string | undefined {
  return typeof format === 'string' ? FORMATS[format]?.sample : undefined;
}

/** Whether `text` is of `format`; true for a format the scripted model does not know. */
export function matchesFormat(format: unknown, text: string): boolean {
  if (typeof format !== 'string') return true;
  const known = FORMATS[format];
  return known === undefined || known.check(text);
}
