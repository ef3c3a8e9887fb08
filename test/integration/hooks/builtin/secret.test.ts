// The secret hook on the real control plane: the Revision waits for its Secret (and its keys),
// then is released with the Secret bound; the hook says clearly when the Secret never came.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { addHook, builtinEnv, hookIdentity, hookStatusOf, serveBuiltinHook } from './_support.ts';

const root = fileURLToPath(new URL('../../../../', import.meta.url));
let env: GateEnv;

test.before(async () => {
  env = await builtinEnv('secret');
});

test.after.always(async () => {
  await env?.stop();
});

test('the Revision waits for its Secret and its keys, then is released with the Secret bound', async (t) => {
  const server = await serveBuiltinHook(t, env, 'secret');
  const { hook, annotations } = await addHook(env, 'db', server.url, {
    params: { secretName: '{{service}}-db', requiredKeys: ['username'], as: 'env', env: { DATABASE_URL: 'url' } },
    allowed: ['env', 'volume'],
  });
  await env.createRevision('shop-00001', { annotations });
  const waiting = (pattern: RegExp) =>
    env.waitForRun('shop-00001', `hook message ${pattern}`, (r) => pattern.test(hookStatusOf(r, hook)?.message ?? ''));

  await waiting(new RegExp(`^waiting: Secret ${env.namespace}/shop-db does not exist yet$`));
  await env.core.createNamespacedSecret({
    namespace: env.namespace,
    body: { metadata: { name: 'shop-db' }, stringData: { username: 'shop' } },
  });
  await waiting(/^waiting: Secret .*\/shop-db lacks the key url$/);
  t.true(isHeld(await env.getRevision('shop-00001')), 'held while a key is missing');

  await env.core.patchNamespacedSecret({
    name: 'shop-db',
    namespace: env.namespace,
    body: [{ op: 'add', path: '/data/url', value: Buffer.from('postgres://shop').toString('base64') }],
  });
  await env.waitReleased('shop-00001');
  const run = await env.waitForRun('shop-00001', 'Released', (r) => r.status?.phase === 'Released');
  const status = hookStatusOf(run, hook);
  t.is(status?.message, `Secret ${env.namespace}/shop-db is ready; bound as env DATABASE_URL`);
  t.deepEqual(status?.contributions, [{ name: 'shop-db', secretName: 'shop-db', as: 'env', env: { DATABASE_URL: 'url' } }]);
  t.is((await env.getRevision('shop-00001')).metadata?.labels?.['prestart.dev/inject'], 'true');
});

test('a Secret that never appears fails the hook before the deadline, saying which and what to do', async (t) => {
  const server = await serveBuiltinHook(t, env, 'secret');
  const { hook, annotations } = await addHook(env, 'never', server.url, {
    params: { secretName: 'never-there' },
    allowed: ['volume'],
    timeout: '5s',
  });
  await env.createRevision('late-00001', { annotations });

  const run = await env.waitForRun('late-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  const status = hookStatusOf(run, hook);
  t.is(status?.phase, 'Failed', 'the hook said why before the gate timed it out');
  t.regex(
    status?.message ?? '',
    new RegExp(`^Secret ${env.namespace}/never-there does not exist yet after \\ds, and the hook's time is up\\.`),
  );
  t.regex(status?.message ?? '', /kubectl annotate prestartrun late-00001 .* prestart\.dev\/retry=/);
  t.true(isHeld(await env.getRevision('late-00001')));
});

test('knative-prestart hook secret serves the hook from the command line', async (t) => {
  const { path } = await hookIdentity(env, 'secret');
  const hookName = `${env.instance}-cli`;
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'cli/main.ts',
      'hook',
      'secret',
      '--name',
      hookName,
      '--kubeconfig',
      path,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--poll-max',
      '1',
      '--log-level',
      'warn',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, K_SINK: '' } },
  );
  t.teardown(() => stop(child));
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  const url = await waitFor(() => /listening on (http:\/\/\S+),/.exec(out)?.[1], {
    timeoutMs: 60_000,
    what: 'the hook command to listen',
    bail: () => (child.exitCode !== null ? new Error(`the hook command exited ${child.exitCode}: ${out}`) : undefined),
  });
  t.regex(out, new RegExp(`^hook secret listening on http://127\\.0\\.0\\.1:\\d+, serving PrestartHook ${hookName}$`, 'm'));

  await env.core.createNamespacedSecret({ namespace: env.namespace, body: { metadata: { name: 'cli-db' }, stringData: { uri: 'x' } } });
  const { annotations } = await addHook(env, 'cli', url, { params: { secretName: 'cli-db' }, allowed: ['volume'] });
  await env.createRevision('cli-00001', { annotations });
  await env.waitReleased('cli-00001');
  const run = await env.waitForRun('cli-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.deepEqual(hookStatusOf(run, hookName)?.contributions, [{ name: 'cli-db', secretName: 'cli-db', as: 'volume' }]);
});

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
