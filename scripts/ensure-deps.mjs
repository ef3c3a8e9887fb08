// @ts-check
// Installs the locked dependencies when node_modules is missing or stale, so that `npm test` and
// `npm run quickstart` work on a fresh clone (they run this first as their npm pre-script).
// Node built-ins only: it runs before anything is installed.
//
//   node scripts/ensure-deps.mjs           npm ci if needed, else silent
//   node scripts/ensure-deps.mjs --stamp   record that node_modules matches package-lock.json
//                                          (package.json's postinstall, so a hand-run `npm ci` or
//                                          `npm install` counts too)
//
// "Stale" means package-lock.json changed since the last install. We keep our own stamp (the
// lock's sha256, in node_modules, which `npm ci` deletes) rather than read npm's hidden
// node_modules/.package-lock.json: that one lists only what was installed on this platform (no
// other platforms' optional binaries) and npm trusts it by file times, so comparing it with the
// lock would mean re-implementing npm's own rules.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const STAMP = '.knative-prestart-lock.sha256';

/**
 * Why node_modules must be installed again, or undefined when it is up to date.
 * @param {{ nodeModules: boolean, stamp: string | undefined, lockHash: string }} state
 * @returns {string | undefined}
 */
export function installReason({ nodeModules, stamp, lockHash }) {
  if (!nodeModules) return 'node_modules is missing';
  if (stamp === undefined) return 'node_modules has no record of an install from package-lock.json';
  if (stamp.trim() !== lockHash) return 'package-lock.json changed since the last install';
  return undefined;
}

/** @param {string} root */
function lockHash(root) {
  return createHash('sha256')
    .update(readFileSync(join(root, 'package-lock.json')))
    .digest('hex');
}

/** @param {string} root */
function stampInstall(root) {
  writeFileSync(join(root, 'node_modules', STAMP), `${lockHash(root)}\n`);
}

/** @param {string} root */
function readStamp(root) {
  const file = join(root, 'node_modules', STAMP);
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

/** @param {string} root */
function ensure(root) {
  const reason = installReason({ nodeModules: existsSync(join(root, 'node_modules')), stamp: readStamp(root), lockHash: lockHash(root) });
  if (reason === undefined) return 0;
  process.stdout.write(`ensure-deps: ${reason}: npm ci\n`);
  // Under `npm run`, npm_execpath is the npm that runs us: use the same one.
  const npm = process.env.npm_execpath;
  const args = ['ci', '--no-audit', '--no-fund'];
  const result = npm
    ? spawnSync(process.execPath, [npm, ...args], { cwd: root, stdio: 'inherit' })
    : spawnSync('npm', args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (result.status !== 0) {
    process.stderr.write(`ensure-deps: npm ci failed (${result.error?.message ?? `exit ${result.status ?? result.signal}`})\n`);
    return 1;
  }
  stampInstall(root);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  if (process.argv.includes('--stamp')) {
    // As a dependency of another project (no lock file of ours there) there is nothing to stamp.
    if (existsSync(join(root, 'package-lock.json'))) stampInstall(root);
  } else {
    process.exitCode = ensure(root);
  }
}
