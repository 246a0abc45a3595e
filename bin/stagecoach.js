#!/usr/bin/env node
import 'reflect-metadata';
import { main } from '../dist/src/cli/main.js';

// Exit with the command's code even if something still holds the event loop (a timer of a
// library, a socket that did not close): a stage that failed must die for its supervisor to see
// it. Writes to stderr and stdout are synchronous on pipes and files, so nothing is cut off.
process.exit(await main(process.argv));
