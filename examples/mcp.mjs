// An agent given the tools of an MCP server from the registry, runnable:
// `npm run build && node examples/mcp.mjs FOLDER`. The filesystem server is a devDependency.
import { Engine } from 'cohort-agents';
import { scriptBlock, startScriptedModel } from 'cohort-agents/testing';

const folder = process.argv[2] ?? '.';
const model = await startScriptedModel(); // or omit it and set ANTHROPIC_API_KEY
const engine = await Engine.start({
  provider: { baseURL: model.url, model: 'any' },
  // The `mcpServers` of a `.mcp.json` file; `--mcp-config FILE` on the command line.
  mcpServers: {
    files: { command: 'npx', args: ['mcp-server-filesystem', folder] },
  },
});
console.log(engine.toolNames.filter((name) => name.startsWith('mcp__files__')).length > 0);

// The scripted model follows a script; a real model chooses the call itself.
const result = await engine.run({
  tools: ['mcp__files__*'],
  prompt: `List the folder.\n\n${scriptBlock({
    steps: [
      { calls: [{ name: 'mcp__files__list_directory', input: { path: folder } }] },
      { reply: 'listed' },
    ],
  })}`,
});
console.log(result.outcome, result.text);
await engine.close(); // closes the server too; the process exits by itself
await model.close();
