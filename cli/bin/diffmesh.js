#!/usr/bin/env node
// The `diffmesh` command. The TypeScript sources compile to dist/ during `npm ci`/`npm run build`.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('diffmesh: not built yet; run `npm ci` (or `npm run build`) in the repository root\n');
  process.exit(1);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
