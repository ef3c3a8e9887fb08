// The SDK's reply token (hooks/sdk/token-file.ts): read from the projected file, read again when
// the kubelet replaces it, absent only where no file was asked for.
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { tokenFileSource } from '../../../../hooks/sdk/token-file.ts';

test('the token is read, and read again once the file is replaced', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'token-file-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'token');
  await writeFile(file, 'first\n');
  const source = tokenFileSource(file);
  t.is(await source(), 'first');
  // The kubelet's atomic writer: a new file renamed over the old one.
  await writeFile(join(dir, 'next'), 'second-token');
  await rename(join(dir, 'next'), file);
  t.is(await source(), 'second-token');
});

test('a named file must be there; the default one may be absent', async (t) => {
  await t.throwsAsync(tokenFileSource('/nonexistent/prestart-token')(), { message: /cannot be read/ });
  const saved = process.env.PRESTART_TOKEN_FILE;
  delete process.env.PRESTART_TOKEN_FILE;
  t.teardown(() => {
    if (saved !== undefined) process.env.PRESTART_TOKEN_FILE = saved;
  });
  t.is(await tokenFileSource()(), undefined);
});
