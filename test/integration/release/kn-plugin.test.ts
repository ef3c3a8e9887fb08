// The CLI as a kn plugin, installed as an admin installs it: `npm install -g` from the repository,
// then a link named kn-prestart in kn's default plugins directory (~/.config/kn/plugins; kn's
// hidden --plugins-dir flag would be passed on to the plugin too). The real kn (built from knative/client's
// source by devcluster/build-binaries.sh kn) finds it and runs it with the arguments it was given.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { knBinary } from '@knative-prestart/devcluster/kn.ts';
import test from 'ava';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));
let dir: string;
let kn: (...args: string[]) => Promise<{ stdout: string; stderr: string }>;

test.before(async () => {
  const cli = join(root, 'dist/cli/main.js');
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build first`);
  const knPath = knBinary();
  dir = await mkdtemp(join(tmpdir(), 'kn-plugin-'));
  // A global install into a prefix of its own: the machine's global packages stay as they are.
  await run('npm', ['install', '--global', '--prefix', join(dir, 'global'), '--no-audit', '--no-fund', root]);
  // HOME is this directory for kn: its config and plugins directory are the defaults under it.
  const plugins = join(dir, '.config/kn/plugins');
  await mkdir(plugins, { recursive: true });
  await symlink(join(dir, 'global/bin/knative-prestart'), join(plugins, 'kn-prestart'));
  // No kubeconfig or kn config of the machine's: only what the test gives.
  const env = { PATH: process.env.PATH ?? '', HOME: dir };
  kn = (...args) => run(knPath, args, { env });
});

test.after.always(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('kn lists kn-prestart among its plugins', async (t) => {
  const { stdout } = await kn('plugin', 'list');
  t.regex(stdout, /^- kn-prestart : .*\/plugins\/kn-prestart$/m);
});

test('kn prestart --help is the help of knative-prestart', async (t) => {
  const { stdout } = await kn('prestart', '--help');
  t.regex(stdout, /^Usage: knative-prestart \[options\] \[command\]/m);
  t.regex(stdout, /^ {2}gate \[options\]/m);
});

test('kn prestart passes its arguments on: triggers --file prints the Trigger of a broker hook', async (t) => {
  const hooks = join(dir, 'hooks.yaml');
  await writeFile(
    hooks,
    [
      'apiVersion: prestart.dev/v1alpha1',
      'kind: PrestartHook',
      'metadata: {name: migrate}',
      'spec:',
      '  match: {}',
      '  delivery:',
      '    transport: broker',
      '    broker: {name: default, namespace: hooks, subscriber: {uri: "http://migrate.hooks.svc/"}}',
      '',
    ].join('\n'),
  );
  const { stdout } = await kn('prestart', 'triggers', '--file', hooks, '--gate-uri', 'http://gate.example/');
  t.regex(stdout, /^kind: Trigger$/m);
  t.regex(stdout, /^ {2}namespace: hooks$/m);
  t.regex(stdout, /uri: http:\/\/migrate\.hooks\.svc\//);
});
