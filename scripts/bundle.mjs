// The CLI as one tree-shaken, minified ES module (plus the chunks its lazily loaded parts need),
// written over dist/cli/main.js after tsc: what `node dist/cli/main.js`, the image and the kn
// plugin run. Why (issue 14): Node keeps every loaded module's source text in memory, and
// @kubernetes/client-node's generated clients alone are 21 MB of it (+27 MiB heap, +62 MiB RSS
// for the import); the gate uses a handful of those clients, so esbuild leaves the rest out.
// Source maps sit next to the bundle: NODE_OPTIONS=--enable-source-maps maps stack traces back.
//
//   node scripts/bundle.mjs          (npm run build runs it)
import { build } from 'esbuild';

await build({
  entryPoints: { main: 'cli/main.ts' },
  outdir: 'dist/cli',
  // Lazily imported parts (NATS, OpenTelemetry, the CLI's other commands) stay lazy: their own chunks.
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  minify: true,
  sourcemap: 'linked',
  allowOverwrite: true,
  legalComments: 'linked',
  // CommonJS dependencies call require() and read __dirname: give each ES module chunk its own.
  banner: {
    js: [
      "import { createRequire as __prestartRequire } from 'node:module';",
      "import { fileURLToPath as __prestartPath } from 'node:url';",
      'const require = __prestartRequire(import.meta.url);',
      'const __filename = __prestartPath(import.meta.url);',
      "const __dirname = __prestartPath(new URL('.', import.meta.url));",
    ].join(' '),
  },
  logLevel: 'warning',
});
