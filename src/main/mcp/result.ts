import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ToolContent, type ToolContentBlock } from '../../shared/tools/content.js';

/** The image types a model takes; another image is named in text instead. */
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

type ImageType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';

/**
 * An MCP tool result as the agent's tool result: its text (one string when all is text) or its
 * blocks (when an image is among them). `structuredContent` stands in for the text blocks as
 * 2-space JSON: the protocol has a server repeat it there, so both would say it twice. A result
 * with `isError` throws its text, which the agent reads as an `is_error` result and goes on.
 */
export function toolValue(result: CallToolResult): string | ToolContent {
  const blocks = (result.content ?? []).map(block);
  const structured = result.structuredContent;
  const kept =
    structured === undefined || result.isError
      ? blocks
      : [
          { type: 'text' as const, text: JSON.stringify(structured, null, 2) },
          ...blocks.filter((item) => item.type !== 'text'),
        ];
  if (result.isError) {
    throw new Error(textOf(kept) || 'the server marked the result an error and gave no text');
  }
  return kept.some((item) => item.type === 'image') ? new ToolContent(kept) : textOf(kept);
}

function textOf(blocks: readonly ToolContentBlock[]): string {
  return blocks.flatMap((item) => (item.type === 'text' ? [item.text] : [])).join('\n');
}

function block(content: CallToolResult['content'][number]): ToolContentBlock {
  switch (content.type) {
    case 'text':
      return { type: 'text', text: content.text };
    case 'image':
      return IMAGE_TYPES.has(content.mimeType)
        ? {
            type: 'image',
            source: {
              type: 'base64',
              media_type: content.mimeType as ImageType,
              data: content.data,
            },
          }
        : {
            type: 'text',
            text: `[an image of type ${content.mimeType}, which the model cannot read]`,
          };
    case 'audio':
      return {
        type: 'text',
        text: `[audio of type ${content.mimeType}, which the model cannot hear]`,
      };
    case 'resource_link':
      return { type: 'text', text: `[resource ${content.name}: ${content.uri}]` };
    case 'resource': {
      const resource = content.resource;
      return 'text' in resource && typeof resource.text === 'string'
        ? { type: 'text', text: resource.text }
        : { type: 'text', text: `[resource ${resource.uri}, binary, not shown]` };
    }
    default:
      return { type: 'text', text: `[content of an unknown type]` };
  }
}
