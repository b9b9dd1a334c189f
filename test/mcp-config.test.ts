// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${VAR}` is the config files' own syntax, tested here as text.
import { getEventListeners } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadAgentDefinitions } from '../src/main/agents/load.js';
import { agentFileToolsProblem } from '../src/main/agents/resolve.js';
import { checkMcpServers } from '../src/main/mcp/config-check.js';
import { mergeServerSets, readMcpConfigFile } from '../src/main/mcp/config-file.js';
import { duplicateKey } from '../src/main/mcp/duplicate-keys.js';
import { Slots } from '../src/main/mcp/slots.js';
import { UsageError } from '../src/shared/errors.js';
import { entryPicks, unknownEntries } from '../src/shared/tools/selection.js';
import { tempDir } from './helpers.js';

function configFile(text: string): string {
  const file = path.join(tempDir('cohort-mcp-config-'), '.mcp.json');
  writeFileSync(file, text);
  return file;
}

const servers = (entries: unknown) => JSON.stringify({ mcpServers: entries });

describe('an MCP config file', () => {
  it('reads stdio and http entries and expands ${VAR} and ${VAR:-default} from the environment', () => {
    const file = configFile(
      servers({
        fs: { command: 'npx', args: ['-y', 'server', '${ROOT}'], env: { TOKEN: '${TOKEN}' } },
        web: {
          type: 'http',
          url: '${BASE:-http://localhost:1}/mcp',
          headers: { Authorization: 'Bearer ${TOKEN}' },
          maxConcurrency: 4,
        },
      }),
    );
    expect(readMcpConfigFile(file, { ROOT: '/data', TOKEN: 'abc' })).toEqual({
      fs: { type: 'stdio', command: 'npx', args: ['-y', 'server', '/data'], env: { TOKEN: 'abc' } },
      web: {
        type: 'http',
        url: 'http://localhost:1/mcp',
        headers: { Authorization: 'Bearer abc' },
        maxConcurrency: 4,
      },
    });
  });

  it('refuses each kind of bad input with a message naming the file and the entry', () => {
    const cases: [string, RegExp][] = [
      ['{"mcpServers": {', /`[^`]*\.mcp\.json` to be JSON .* it is not JSON/],
      ['[]', /\.mcp\.json` to be an object with an `mcpServers` object, got an array/],
      ['{}', /got no `mcpServers` key/],
      [
        servers({ a: { args: [] } }),
        /server `a` in `[^`]*\.mcp\.json` to have either `command` .* or `url` .*, got neither/,
      ],
      [servers({ a: { command: 'x', url: 'http://h' } }), /server `a` in .* got both/],
      [
        servers({ a: { type: 'sse', url: 'http://h' } }),
        /`type` of server `a` in .* to be `stdio` or `http` .*, got `"sse"`/,
      ],
      [
        servers({ a: { type: 'http', command: 'x' } }),
        /server `a` in .* of `type` `http` to have `url`/,
      ],
      [
        servers({ a: { command: 'x', colour: 1 } }),
        /server `a` in .* to have only .*, got `colour`/,
      ],
      [
        servers({ a: { command: 'x', args: 'y' } }),
        /`args` of server `a` in .* an array of strings/,
      ],
      [
        servers({ a: { command: 'x', maxConcurrency: 0 } }),
        /`maxConcurrency` of server `a` in .* a whole number from 1/,
      ],
      [
        servers({ a: { type: 'http', url: 'ftp://h' } }),
        /`url` of server `a` in .* http:\/\/ or https:\/\/ URL/,
      ],
      [servers({ 'a b': { command: 'x' } }), /server's name to be 1-64 of .*, got `a b` in/],
      [servers({ a__b: { command: 'x' } }), /without `__`/],
      [servers({ a_: { command: 'x' } }), /neither starting nor ending with `_`.*got `a_`/],
      [servers({ _a: { command: 'x' } }), /neither starting nor ending with `_`.*got `_a`/],
      [
        '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}',
        /every server in `[^`]*\.mcp\.json` to have its own name, got `a` twice/,
      ],
    ];
    for (const [text, message] of cases) {
      expect(() => readMcpConfigFile(configFile(text), {}), text).toThrow(message);
    }
    expect(() => readMcpConfigFile('/nowhere/.mcp.json')).toThrow(
      /`\/nowhere\/.mcp.json` to be a readable MCP config file, but it does not exist/,
    );
  });

  it('names an unset variable and where it is used, and never shows a value', () => {
    const file = configFile(
      servers({ gh: { command: 'x', env: { TOKEN: '${GH_TOKEN}', OTHER: 'hunter2-secret' } } }),
    );
    expect(() => readMcpConfigFile(file, {})).toThrow(
      /environment variable `GH_TOKEN` to be set for `env.TOKEN` of server `gh` in `[^`]*\.mcp\.json`/,
    );
    const bad = configFile(servers({ gh: { command: 'x', env: { A: 'hunter2-secret', B: 5 } } }));
    expect(() => readMcpConfigFile(bad, {})).toThrow(
      /`env.B` of server `gh` .* a string, got a number/,
    );
    try {
      readMcpConfigFile(bad, {});
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter2');
    }
  });

  it('shows no value of an entry in any message: not an env value, an argument, a URL or the file’s text', () => {
    const secret = 'hunter2-secret-value';
    const messages = [
      () => checkMcpServers([{ command: 'x', env: { TOKEN: secret } }], '`mcpServers`', {}),
      () => checkMcpServers({ gh: `npx ${secret}` }, '`mcpServers`', {}),
      () => checkMcpServers({ gh: { command: 'x', args: ['--token', secret, 5] } }, '`m`', {}),
      () => checkMcpServers({ gh: { command: 'x', args: `--token ${secret}` } }, '`m`', {}),
      () => checkMcpServers({ gh: { url: '${TOKEN}' } }, '`m`', { TOKEN: secret }),
      () => checkMcpServers({ gh: { command: 'x', env: secret } }, '`m`', {}),
      () => checkMcpServers({ gh: { command: 'x', maxConcurrency: secret } }, '`m`', {}),
      () => readMcpConfigFile(configFile(`x{"mcpServers": {"a": {"env": {"T": "${secret}"}}}}`)),
      () => readMcpConfigFile(configFile(`{"mcpServers": {"a": {"env": {"T": "${secret}" "U"}}}}`)),
    ].map((check) => {
      try {
        check();
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      throw new Error('expected a UsageError');
    });
    for (const message of messages) expect(message).not.toContain('hunter2');
    expect(messages[2]).toMatch(/`args` of server `gh` .* got number `5` at `args\[2\]`/);
    expect(messages[4]).toMatch(/`url` of server `gh` .* to be an http:\/\/ or https:\/\/ URL/);
    expect(messages[8]).toMatch(
      /it is not JSON: Expected ',' or '}' after property value at line 1, column \d+/,
    );
  });

  it('refuses one name in two sources, naming both', () => {
    const one = checkMcpServers({ a: { command: 'x' } }, '`mcpServers`', {});
    expect(() =>
      mergeServerSets([
        { servers: one, from: '`mcpServers`' },
        { servers: one, from: '`b.json`' },
      ]),
    ).toThrow(
      'Expected every MCP server to have its own name, got `a` in `mcpServers` and in `b.json`',
    );
  });

  it('finds a key given twice at any depth, and none in text without one', () => {
    expect(duplicateKey('{"a": {"b": 1, "c": {"b": 2}}, "d": "\\"a\\": 1"}')).toBeUndefined();
    expect(duplicateKey('{"x": [{"k": 1, "k": 2}]}')).toEqual({ path: ['x'], key: 'k' });
    expect(duplicateKey('{"mcpServers": {"s": {}, "s": {}}}')).toEqual({
      path: ['mcpServers'],
      key: 's',
    });
  });
});

describe('a tools selection', () => {
  it('picks all of one server with mcp__NAME__*, and nothing of another', () => {
    expect(entryPicks('mcp__fs__*', 'mcp__fs__read_file')).toBe(true);
    expect(entryPicks('mcp__fs__*', 'mcp__fsx__read_file')).toBe(false);
    expect(entryPicks('mcp__*', 'mcp__fs__read_file')).toBe(false);
    // Server `fs`'s pattern picks its tool `_x`, and nothing of a server named `fs_x`.
    expect(entryPicks('mcp__fs__*', 'mcp__fs___x')).toBe(true);
    expect(entryPicks('mcp__fs__*', 'mcp__fs_x__read')).toBe(false);
    expect(entryPicks('mcp__fs___*', 'mcp__fs___x')).toBe(false);
    expect(unknownEntries(['mcp__fs__*', 'mcp__gh__*', 'echo'], ['mcp__fs__a', 'echo'])).toEqual([
      'mcp__gh__*',
    ]);
  });
});

describe('a server’s call slots', () => {
  it('holds calls past the cap in order, and a waiter that aborts leaves no listener', async () => {
    const slots = new Slots(2);
    const signal = new AbortController().signal;
    const first = await slots.take(signal);
    await slots.take(signal);
    const gone = new AbortController();
    const abandoned = slots.take(gone.signal);
    const third = slots.take(signal);
    expect(getEventListeners(gone.signal, 'abort')).toHaveLength(1);
    gone.abort('cancelled');
    await expect(abandoned).rejects.toBe('cancelled');
    expect(getEventListeners(gone.signal, 'abort')).toHaveLength(0);
    first();
    first(); // a second release gives nothing back
    await third;
    expect(slots.inUse).toBe(2);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('gives back a slot handed to a waiter whose signal aborts before it wakes', async () => {
    const slots = new Slots(1);
    const release = await slots.take(new AbortController().signal);
    const late = new AbortController();
    const waiting = slots.take(late.signal);
    // The slot goes to the waiter, and its agent is cancelled in the same turn.
    release();
    late.abort('cancelled');
    await expect(waiting).rejects.toBe('cancelled');
    expect(slots.inUse).toBe(0);
  });
});

describe('an agent file choosing MCP tools', () => {
  it('may name all of one server with mcp__NAME__*, checked against the tools there are', () => {
    const dir = tempDir('cohort-mcp-agents-');
    writeFileSync(
      path.join(dir, 'searcher.md'),
      [
        '---',
        'name: searcher',
        'description: Searches.',
        `tools: mcp__web__*, echo, mcp__web__${'long_'.repeat(20)}`,
        '---',
        'Search.',
        '',
      ].join('\n'),
    );
    const [definition] = loadAgentDefinitions(dir, { required: true });
    // An MCP tool's name may be up to 128 characters, past the 64 of other tools.
    expect(definition?.tools).toEqual(['mcp__web__*', 'echo', `mcp__web__${'long_'.repeat(20)}`]);
    expect(
      agentFileToolsProblem(definition!, [
        'mcp__web__search',
        'echo',
        `mcp__web__${'long_'.repeat(20)}`,
      ]),
    ).toBeUndefined();
    expect(agentFileToolsProblem(definition!, ['echo'])?.message).toMatch(
      /searcher\.md:4: Expected `tools` to name known tools \(`echo`\), got `mcp__web__\*`, `mcp__web__long_/,
    );
  });
});
