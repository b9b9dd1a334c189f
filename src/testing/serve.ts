#!/usr/bin/env node
import { isEntryScript } from './entry-script.js';
import { mockCommand } from './serve-command.js';

if (isEntryScript(import.meta.url)) {
  process.exitCode = await mockCommand(process.argv.slice(2));
}
