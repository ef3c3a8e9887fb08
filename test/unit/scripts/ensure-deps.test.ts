// When `npm test` and `npm run quickstart` install the locked dependencies first (scripts/ensure-deps.mjs).
import test from 'ava';
import { installReason } from '../../../scripts/ensure-deps.mjs';

const lockHash = 'a'.repeat(64);

test('a fresh clone installs', (t) => {
  t.is(installReason({ nodeModules: false, stamp: undefined, lockHash }), 'node_modules is missing');
});

test('node_modules without our stamp (an interrupted install, an old checkout) installs again', (t) => {
  t.regex(installReason({ nodeModules: true, stamp: undefined, lockHash }) ?? '', /no record of an install/);
});

test('a changed package-lock.json installs again', (t) => {
  t.regex(installReason({ nodeModules: true, stamp: `${'b'.repeat(64)}\n`, lockHash }) ?? '', /package-lock\.json changed/);
});

test('an install stamped with this lock is up to date', (t) => {
  t.is(installReason({ nodeModules: true, stamp: `${lockHash}\n`, lockHash }), undefined);
});
