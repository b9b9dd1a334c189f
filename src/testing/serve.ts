#!/usr/bin/env node
/**
 * Runs the scripted model on its own:
 * `node dist/src/testing/serve.js --port 0 --ttft-ms 200 --tps 50 --seed 1`.
 * See `mockCommand` for the flags.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mockCommand } from './serve-command.js';

function isEntry(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntry()) {
  process.exitCode = await mockCommand(process.argv.slice(2));
}
