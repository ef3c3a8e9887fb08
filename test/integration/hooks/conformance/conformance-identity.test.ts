// R10 against real SDK hook services: told that sender identity is on, the checker passes a hook
// that sends its projected token with every reply and fails, on R10 alone, one that sends none.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { failuresOf, runConformance } from '../../../../hooks/conformance/index.ts';
import { succeed } from '../../../../hooks/sdk/index.ts';
import { hookFor } from '../_support.ts';

const fast = { timeoutMs: 10_000, quietMs: 300, identity: true };

test('an SDK hook with a token file passes R10', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'conformance-token-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'prestart-token');
  // The checker looks for the header only (it has no apiserver to review the token with).
  await writeFile(tokenFile, 'eyJhbGciOiJSUzI1NiJ9.e30.c2ln');
  const hook = await hookFor(t, { name: 'db', tokenFile, handler: async () => succeed('done') });
  const report = await runConformance(hook.url, { hook: 'db', ...fast });
  t.deepEqual(failuresOf(report), []);
  t.regex(report.checks.find((c) => c.rule === 'R10-reply-carries-token')?.detail ?? '', /each with a bearer token/);
});

test('an SDK hook without a token fails R10 only', async (t) => {
  const hook = await hookFor(t, { name: 'db', tokenFile: '', handler: async () => succeed('done') });
  const report = await runConformance(hook.url, { hook: 'db', ...fast });
  t.deepEqual([...new Set(failuresOf(report).map((c) => c.rule))], ['R10-reply-carries-token']);
});
