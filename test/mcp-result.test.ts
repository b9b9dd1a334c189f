import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { toolValue } from '../src/main/mcp/result.js';
import { ToolContent } from '../src/shared/tools/content.js';

const result = (content: CallToolResult['content'], extra: Partial<CallToolResult> = {}) =>
  ({ content, ...extra }) as CallToolResult;

describe('an MCP tool result as the agent reads it', () => {
  it('is one string when all is text, its text blocks joined by lines', () => {
    expect(toolValue(result([]))).toBe('');
    expect(
      toolValue(
        result([
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ]),
      ),
    ).toBe('a\nb');
  });

  it('is blocks when an image is among them; an image a model cannot read is named instead', () => {
    const value = toolValue(
      result([
        { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        { type: 'image', data: 'AAAA', mimeType: 'image/tiff' },
      ]),
    );
    expect(value).toBeInstanceOf(ToolContent);
    expect((value as ToolContent).blocks).toEqual([
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
      { type: 'text', text: '[an image of type image/tiff, which the model cannot read]' },
    ]);
  });

  it('names audio, links and binary resources, and gives a text resource its text', () => {
    expect(
      toolValue(
        result([
          { type: 'audio', data: 'AAAA', mimeType: 'audio/wav' },
          { type: 'resource_link', uri: 'file:///a.txt', name: 'a.txt' },
          { type: 'resource', resource: { uri: 'file:///b.txt', text: 'bee' } },
          { type: 'resource', resource: { uri: 'file:///c.bin', blob: 'AAAA' } },
        ]),
      ),
    ).toBe(
      '[audio of type audio/wav, which the model cannot hear]\n[resource a.txt: file:///a.txt]\nbee\n[resource file:///c.bin, binary, not shown]',
    );
  });

  it('gives structuredContent as JSON in place of the text that repeats it', () => {
    expect(
      toolValue(result([{ type: 'text', text: '{"sum":3}' }], { structuredContent: { sum: 3 } })),
    ).toBe('{\n  "sum": 3\n}');
  });

  it('throws the text of an isError result, so the agent reads it as an is_error result', () => {
    expect(() =>
      toolValue(result([{ type: 'text', text: 'no such repo' }], { isError: true })),
    ).toThrow('no such repo');
    expect(() => toolValue(result([], { isError: true }))).toThrow('gave no text');
  });
});
