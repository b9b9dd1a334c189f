import { Buffer } from 'node:buffer';
import { isRecord } from './is-record.js';
import type { MediaBlock } from './messages-api.js';
import { checkCacheControl, checkKeys, checkOptionalString, fail } from './request-problem.js';
import { checkTextBlock } from './request-text.js';

/**
 * Input tokens charged for one image, whatever its size: about what the real API charges a
 * picture of roughly 1,100 × 1,100 pixels. Its base64 never counts, so a 5 MB image does not
 * cost a million tokens.
 */
export const IMAGE_TOKENS = 1600;

/**
 * Input tokens charged for a document the server cannot see into (a `url` or `file`
 * source): one image-sized page.
 */
export const UNSEEN_DOCUMENT_TOKENS = 1600;

/**
 * Input tokens charged per page of a base64 PDF: the real API reads each page as text plus
 * an image of it, which the docs put at roughly 1,500 to 3,000 tokens a page.
 */
export const PDF_PAGE_TOKENS = 2000;

/**
 * Pages counted at most per PDF, so that a small file that merely repeats `/Type /Page` cannot
 * claim millions of tokens: 100 pages (200,000 tokens) is the real API's page limit for a
 * request to a model with a 200k-token context.
 */
export const MAX_PDF_PAGES = 100;

/** What the message checks add up over one request. */
export interface MediaTally {
  /** Input tokens of every image and document, tool_result contents included. */
  tokens: number;
}

const IMAGE_MEDIA_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
// The keys of each block and source, from SDK 1.14's ImageBlockParam, DocumentBlockParam and
// their source types; anything else is an extra input, as the real API says.
const IMAGE_KEYS = new Set(['type', 'source', 'cache_control', 'transformations']);
const DOCUMENT_KEYS = new Set(['type', 'source', 'cache_control', 'citations', 'context', 'title']);
const BASE64_SOURCE_KEYS = new Set(['type', 'media_type', 'data']);
const URL_SOURCE_KEYS = new Set(['type', 'url']);
const FILE_SOURCE_KEYS = new Set(['type', 'file_id']);
const CONTENT_SOURCE_KEYS = new Set(['type', 'content']);
const TRANSFORMATION_KEYS = new Set(['oversized_image']);
const CITATIONS_CONFIG_KEYS = new Set(['enabled']);
// A page object of a PDF: `/Type /Page`, not `/Type /Pages` (the page tree). Compiled once.
const PDF_PAGE = /\/Type\s*\/Page(?![A-Za-z])/g;

/** Checks an image or document block and charges its tokens to `tally`. */
export function checkMedia(
  block: Record<string, unknown>,
  path: string,
  tally: MediaTally,
): MediaBlock {
  const isImage = block.type === 'image';
  const tokens = isImage ? checkImage(block, path) : checkDocument(block, path);
  tally.tokens += tokens;
  return { type: isImage ? 'image' : 'document', tokens };
}

function checkImage(block: Record<string, unknown>, path: string): number {
  checkKeys(block, IMAGE_KEYS, path);
  checkCacheControl(block.cache_control, `${path}.cache_control`);
  const { transformations } = block;
  if (transformations !== undefined && transformations !== null) {
    if (!isRecord(transformations)) {
      fail(`${path}.transformations`, 'an object or null', transformations);
    }
    checkKeys(transformations, TRANSFORMATION_KEYS, `${path}.transformations`);
    const oversized = transformations.oversized_image;
    if (oversized !== undefined && oversized !== 'downsize' && oversized !== 'error') {
      fail(`${path}.transformations.oversized_image`, '"downsize" or "error"', oversized);
    }
  }
  return checkImageSource(block.source, `${path}.source`);
}

function checkImageSource(source: unknown, path: string): number {
  if (!isRecord(source)) fail(path, 'an image source object', source);
  switch (source.type) {
    case 'base64':
      checkKeys(source, BASE64_SOURCE_KEYS, path);
      if (typeof source.media_type !== 'string' || !IMAGE_MEDIA_TYPES.has(source.media_type)) {
        fail(
          `${path}.media_type`,
          '"image/jpeg", "image/png", "image/gif" or "image/webp"',
          source.media_type,
        );
      }
      requireNonEmpty(source.data, `${path}.data`);
      break;
    case 'url':
      checkKeys(source, URL_SOURCE_KEYS, path);
      requireNonEmpty(source.url, `${path}.url`);
      break;
    case 'file':
      checkKeys(source, FILE_SOURCE_KEYS, path);
      requireNonEmpty(source.file_id, `${path}.file_id`);
      break;
    default:
      fail(`${path}.type`, '"base64", "url" or "file"', source.type);
  }
  return IMAGE_TOKENS;
}

function checkDocument(block: Record<string, unknown>, path: string): number {
  checkKeys(block, DOCUMENT_KEYS, path);
  checkCacheControl(block.cache_control, `${path}.cache_control`);
  checkOptionalString(block.title, `${path}.title`, true);
  checkOptionalString(block.context, `${path}.context`, true);
  checkCitationsConfig(block.citations, `${path}.citations`);
  return documentTokens(block.source, `${path}.source`);
}

/** Checks an optional `citations: {enabled?: boolean}` of a document or search result. */
export function checkCitationsConfig(citations: unknown, path: string): void {
  if (citations === undefined || citations === null) return;
  if (!isRecord(citations)) fail(path, 'an object or null', citations);
  checkKeys(citations, CITATIONS_CONFIG_KEYS, path);
  const { enabled } = citations;
  if (enabled !== undefined && typeof enabled !== 'boolean') {
    fail(`${path}.enabled`, 'a boolean', enabled);
  }
}

/** A document's input tokens: its text / 4, a PDF's pages, else a page's worth. */
function documentTokens(source: unknown, path: string): number {
  if (!isRecord(source)) fail(path, 'a document source object', source);
  switch (source.type) {
    case 'base64': {
      checkKeys(source, BASE64_SOURCE_KEYS, path);
      if (source.media_type !== 'application/pdf') {
        fail(`${path}.media_type`, '"application/pdf"', source.media_type);
      }
      return pdfTokens(requireNonEmpty(source.data, `${path}.data`));
    }
    case 'text': {
      checkKeys(source, BASE64_SOURCE_KEYS, path);
      if (source.media_type !== 'text/plain') {
        fail(`${path}.media_type`, '"text/plain"', source.media_type);
      }
      if (typeof source.data !== 'string') fail(`${path}.data`, 'a string', source.data);
      return Math.ceil(source.data.length / 4);
    }
    case 'content':
      checkKeys(source, CONTENT_SOURCE_KEYS, path);
      return contentSourceTokens(source.content, `${path}.content`);
    case 'url':
      checkKeys(source, URL_SOURCE_KEYS, path);
      requireNonEmpty(source.url, `${path}.url`);
      return UNSEEN_DOCUMENT_TOKENS;
    case 'file':
      checkKeys(source, FILE_SOURCE_KEYS, path);
      requireNonEmpty(source.file_id, `${path}.file_id`);
      return UNSEEN_DOCUMENT_TOKENS;
    default:
      return fail(`${path}.type`, '"base64", "text", "content", "url" or "file"', source.type);
  }
}

/**
 * A base64 PDF's input tokens: PDF_PAGE_TOKENS per page object in the decoded file, at least
 * one page and at most MAX_PDF_PAGES. A PDF that keeps its page objects in compressed object
 * streams shows none, and is charged one page.
 */
export function pdfTokens(base64: string): number {
  const text = Buffer.from(base64, 'base64').toString('latin1');
  let pages = 0;
  for (const _page of text.matchAll(PDF_PAGE)) {
    pages += 1;
    if (pages === MAX_PDF_PAGES) break;
  }
  return Math.max(1, pages) * PDF_PAGE_TOKENS;
}

/** A `content` document source: a string, or text and image blocks. */
function contentSourceTokens(content: unknown, path: string): number {
  if (typeof content === 'string') return Math.ceil(content.length / 4);
  if (!Array.isArray(content)) fail(path, 'a string or an array of text and image blocks', content);
  let tokens = 0;
  content.forEach((part: unknown, index) => {
    const partPath = `${path}.${index}`;
    if (isRecord(part) && part.type === 'image') {
      tokens += checkImage(part, partPath);
      return;
    }
    if (!isRecord(part) || part.type !== 'text') fail(partPath, 'a text or an image block', part);
    tokens += Math.ceil(checkTextBlock(part, partPath).text.length / 4);
  });
  return tokens;
}

function requireNonEmpty(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.length === 0) fail(path, 'a non-empty string', value);
  return value;
}
