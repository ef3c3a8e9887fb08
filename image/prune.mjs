// Drops what Node never loads at run time from a directory tree (TypeScript declarations,
// source maps, docs), to keep the image small. Licence files stay.
//
//   node image/prune.mjs <dir>
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const DROP = /\.(d\.ts|d\.mts|d\.cts|map|md|markdown)$|^(CHANGELOG|HISTORY)(\..*)?$/i;
const KEEP = /^(LICEN[CS]E|COPYING|NOTICE)/i;

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node image/prune.mjs <dir>');
  process.exit(2);
}
let dropped = 0;
const walk = (d) => {
  for (const entry of readdirSync(d, { withFileTypes: true })) {
    const path = join(d, entry.name);
    if (entry.isDirectory()) walk(path);
    else if (DROP.test(entry.name) && !KEEP.test(entry.name)) {
      rmSync(path);
      dropped++;
    }
  }
};
walk(dir);
console.log(`prune: dropped ${dropped} files under ${dir}`);
