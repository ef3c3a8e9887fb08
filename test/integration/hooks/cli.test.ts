// The commands as users run them: in-process for exit codes and output, and once for real, the
// two commands docs/hooks.md gives.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { succeed } from '../../../hooks/sdk/index.ts';
import { start as nonCloudEventBody } from '../../fixtures/broken-hooks/non-cloudevent-body.ts';
import { runCli } from '../../support/hook-cli.ts';
import { hookFor } from './_support.ts';

const root = fileURLToPath(new URL('../../../', import.meta.url));

test('conformance exits 1 and prints one FAIL line per failure', async (t) => {
  const hook = await nonCloudEventBody('db');
  t.teardown(() => hook.close());
  const { out, code } = await runCli(['conformance', hook.url, '--hook', 'db', '--timeout', '10']);
  t.is(code, 1);
  t.deepEqual(
    out
      .split('\n')
      .filter((l) => l.startsWith('FAIL '))
      .map((l) => l.split(':')[0]),
    ['FAIL R5-no-non-cloudevent-2xx-body'],
  );
  t.regex(out, /^FAILED: 1 of 9 rules/m);
});

test('conformance --json prints the report', async (t) => {
  const hook = await hookFor(t, { name: 'db', mode: 'sync', handler: async () => succeed() });
  const { out, code } = await runCli(['conformance', hook.url, '--hook', 'db', '--json']);
  t.is(code, 0);
  t.like(JSON.parse(out), { url: hook.url, hook: 'db', passed: true });
});

test('simulate passes --param and --annotation on, and exits 2 when the Revision stays held', async (t) => {
  const hook = await hookFor(t, {
    name: 'db',
    mode: 'sync',
    handler: async (req) => succeed(`${JSON.stringify(req.params)} ${req.revision.annotations.team}`),
  });
  const released = await runCli([
    'simulate',
    hook.url,
    '--hook',
    'db',
    '--param',
    'dryRun=true',
    '--param',
    'target=orders',
    '--annotation',
    'team=payments',
  ]);
  t.is(released.code, 0);
  t.regex(released.out, /reply {4}← in the answer: succeeded "\{\\"dryRun\\":true,\\"target\\":\\"orders\\"\} payments"/);
  t.regex(released.out, /^decision : RELEASED/m);
  const held = await runCli(['simulate', hook.url, '--hook', 'other', '--timeout', '0.3']);
  t.is(held.code, 2);
  t.regex(held.out, /^decision : HELD \(no final reply within 0.3s/m);
});

function spawnNode(args: string[], env: Record<string, string> = {}): ChildProcess & { output: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  return Object.assign(child, { output: () => output });
}

test('the commands of docs/hooks.md: the example hook, then the checker against it, exit 0', async (t) => {
  const hook = spawnNode(['examples/typescript-binding-hook/index.ts'], {
    PORT: '0',
    HOST: '127.0.0.1',
    PROVISION_MS: '300',
    LOG_LEVEL: 'warn',
  });
  t.teardown(() => {
    hook.kill('SIGKILL');
  });
  const url = await waitFor(() => /listening on (http:\/\/\S+)/.exec(hook.output())?.[1], {
    what: 'the example hook to listen',
    timeoutMs: 60_000,
  });
  const checker = spawnNode(['cli/main.ts', 'conformance', url, '--hook', 'provision-db']);
  const code = await new Promise<number | null>((resolve) => checker.on('exit', resolve));
  t.is(code, 0, checker.output());
  t.regex(checker.output(), /^PASSED: 9 rules/m);
});
