#!/usr/bin/env node
// The `diffmesh` command. The TypeScript sources compile to dist/ during `npm ci`/`npm run build`.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('diffmesh: not built yet; run `npm ci` (or `npm run build`) in the repository root\n');
  process.exit(1);
}
// On mutual TLS, grpc-js sends a loopback IP as the TLS server name, which Node flags once per
// process (DEP0123, harmless: the certificate is still checked against the IP). Every other
// warning is printed as Node prints it.
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.code !== 'DEP0123') process.stderr.write(`(node:${process.pid}) ${w.code ? `[${w.code}] ` : ''}${w.name}: ${w.message}\n`);
});
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
