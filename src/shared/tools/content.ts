import type Anthropic from '@anthropic-ai/sdk';

/** A block of a tool result the model reads: text, or an image. */
export type ToolContentBlock = Anthropic.TextBlockParam | Anthropic.ImageBlockParam;

/**
 * A tool value given as content blocks rather than rendered to text: a tool whose answer holds
 * an image (an MCP tool's `image` content) returns one. Any other value follows the one render
 * rule. Its blocks are plain data, so they cross threads as they are.
 */
export class ToolContent {
  readonly blocks: ToolContentBlock[];

  constructor(blocks: ToolContentBlock[]) {
    this.blocks = blocks;
  }
}

/** A text block with secrets removed (`redact`); an image block as it is. */
export function redactBlocks(
  blocks: readonly ToolContentBlock[],
  redact: (text: string) => string,
): ToolContentBlock[] {
  return blocks.map((block) =>
    block.type === 'text' ? { ...block, text: redact(block.text) } : block,
  );
}
