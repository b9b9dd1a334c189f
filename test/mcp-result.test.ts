import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { McpConnection } from '../src/main/mcp/connection.js';
import { toolValue } from '../src/main/mcp/result.js';
import { mcpTools } from '../src/main/mcp/tools.js';
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

describe('an MCP server’s tools as agents see them', () => {
  const connection = new McpConnection('gh', { type: 'stdio', command: 'unused' });
  const listed = (tools: unknown[]) => tools as Parameters<typeof mcpTools>[1];

  it('are named mcp__NAME__TOOL with the server’s schema, or any object when Ajv or a provider cannot take it', () => {
    const tools = mcpTools(
      connection,
      listed([
        {
          name: 'search',
          description: 'Searches.',
          inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
        },
        {
          name: 'newer',
          inputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' },
        },
        { name: 'odd', inputSchema: { type: 'string' } },
      ]),
      '`gh`',
    );
    expect(tools.map((tool) => [tool.name, tool.inputSchema])).toEqual([
      ['mcp__gh__search', { type: 'object', properties: { q: { type: 'string' } } }],
      ['mcp__gh__newer', { type: 'object' }],
      ['mcp__gh__odd', { type: 'object' }],
    ]);
    expect(tools[1]?.description).toBe('newer (MCP server gh)');
    expect(tools.every((tool) => tool.parallel === true && tool.timeoutMs === undefined)).toBe(
      true,
    );
  });

  it('refuse a tool whose full name a provider would not take, naming the server', () => {
    expect(() =>
      mcpTools(
        connection,
        listed([{ name: 'a.b', inputSchema: { type: 'object' } }]),
        '`gh` (in `x.json`)',
      ),
    ).toThrow(
      'Expected each tool of MCP server `gh` (in `x.json`) to have a name that makes `mcp__NAME__TOOL` 1-128 of [a-zA-Z0-9_-], got `a.b`',
    );
  });
});
