// `knative-prestart triggers` as a user runs it: a child process reading a hooks file.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import yaml from 'js-yaml';
import { desiredTriggers } from '../../../triggers/desired.ts';
import { hooksFromYaml } from '../../../triggers/print.ts';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const HOOKS_FILE = fileURLToPath(new URL('./fixtures/hooks.yaml', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], stdin?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'cli/main.ts', 'triggers', ...args],
      { cwd: root, env: { ...process.env, KUBECONFIG: '/nonexistent' }, timeout: 90_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(stdin ?? '');
  });
}

test('prints the Triggers of the hooks in a file as multi-document YAML', async (t) => {
  const gate = 'http://gate.example.com:8080/';
  const run = await cli(['--file', HOOKS_FILE, '--gate-uri', gate]);
  t.is(run.code, 0, run.stderr);
  const expected = desiredTriggers(hooksFromYaml(readFileSync(HOOKS_FILE, 'utf8')), { uri: gate });
  t.deepEqual(yaml.loadAll(run.stdout), expected);
  t.is(expected.length, 3);
});

test('--reply-audience puts the sink’s audience on the reply Triggers (as a gate with --reply-identity does)', async (t) => {
  const gate = 'http://gate.example.com:8080/';
  const run = await cli(['--file', HOOKS_FILE, '--gate-uri', gate, '--reply-audience', 'knative-prestart-gate']);
  t.is(run.code, 0, run.stderr);
  const expected = desiredTriggers(hooksFromYaml(readFileSync(HOOKS_FILE, 'utf8')), { uri: gate, audience: 'knative-prestart-gate' });
  t.deepEqual(yaml.loadAll(run.stdout), expected);
  t.true(expected.some((tr) => tr.spec.subscriber.audience === 'knative-prestart-gate'));
});

test('reads the hooks from stdin with --file -', async (t) => {
  const run = await cli(['--file', '-'], readFileSync(HOOKS_FILE, 'utf8'));
  t.is(run.code, 0, run.stderr);
  const names = (yaml.loadAll(run.stdout) as { metadata: { name: string }; spec: { subscriber: unknown } }[]).map((d) => d.metadata.name);
  t.deepEqual(names, ['prestart-gate-replies-default', 'prestart-hook-db-migrate', 'prestart-hook-image-scan']);
  t.regex(run.stdout, /uri: http:\/\/knative-prestart-gate\.knative-prestart\.svc\//);
});

test('refuses to guess where the hooks come from, and names a broken hook', async (t) => {
  const [neither, broken] = await Promise.all([
    cli([]),
    cli(
      ['--file', '-'],
      'apiVersion: prestart.dev/v1alpha1\nkind: PrestartHook\nmetadata: {name: x}\nspec:\n  delivery: {transport: broker}\n',
    ),
  ]);
  t.not(neither.code, 0);
  t.regex(neither.stderr, /either --file or --from-cluster/);
  t.is(neither.stdout, '');
  t.is(broken.code, 1);
  t.regex(broken.stderr, /knative-prestart: stdin document 1: PrestartHook x has transport broker but no delivery\.broker/);
  t.is(broken.stdout, '');
});
