// The hold in kn's own view (issue 12, item 1): the real `kn` (v0.50.0, built from knative/client's
// source) against real Knative Serving shows which hook holds a Revision, its phase, progress,
// deadline and last message, and after a failure the reason and the retry command, from the
// gate's own condition (PrestartHooksReady, severity Info) on the Revision's status. Knative's
// reconciler keeps it through its own status writes, and its Ready never turns False because of it.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cacheDir, pinnedVersions } from '@knative-prestart/devcluster/binaries.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { knBinary } from '@knative-prestart/devcluster/kn.ts';
import {
  condition,
  conditionsLine,
  Knative,
  type KnativeObject,
  waitForRevision,
  watchCollection,
} from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import { PRESTART_CONDITION } from '../../api/types.ts';
import { type HookServer, serveHook } from '../../hooks/index.ts';

const run = promisify(execFile);
/** Knative's severity of the gate's condition (Info: never folded into Ready). */
const severity = (r: KnativeObject) => (condition(r, PRESTART_CONDITION) as { severity?: string } | undefined)?.severity;
let env: GateEnv;
let serving: KnativeServing;
let kn: Knative;
let hookServer: HookServer;
let finish: ((message: string) => void) | undefined;
const KEY = 'kn-view';

test.before(async () => {
  env = await gateEnv('knview');
  serving = await startKnativeServing(env.cluster, { progress: (line) => process.stderr.write(`e2e: ${line}\n`) });
  kn = new Knative(env.admin, env.namespace);
  hookServer = await serveHook({
    name: `${env.instance}-migrate`,
    host: '127.0.0.1',
    port: 0,
    sink: '',
    logger: pino({ name: 'migrate-hook', level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
    handler: async (_req, ctx) => {
      await ctx.progress(40, 'migrating table 3/7');
      const message = await new Promise<string>((resolve) => {
        finish = resolve;
      });
      return { succeeded: false, message };
    },
  });
  const name = `${env.instance}-migrate`;
  await env.createHook(name, {
    match: env.annotationMatch(KEY, 'on'),
    timeout: '10m',
    delivery: { transport: 'http', url: hookServer.url },
  });
  await env.waitUntilStamped(name, { [KEY]: 'on' });
});

test.after.always(async () => {
  await hookServer?.close();
  await env?.stop();
  await serving?.stop();
});

/** The real kn, with the test cluster's admin kubeconfig and nothing of the machine's. */
async function knCli(...args: string[]): Promise<string> {
  const { stdout } = await run(knBinary(), [...args, '-n', env.namespace], {
    env: { PATH: process.env.PATH ?? '', HOME: env.cluster.dir, KUBECONFIG: env.cluster.kubeconfigPath },
  });
  return stdout;
}

async function kubectl(...args: string[]): Promise<string> {
  const bin = join(cacheDir(), 'bin', `kubernetes-${pinnedVersions().KUBERNETES_VERSION}`, 'kubectl');
  const { stdout } = await run(bin, [...args, '-n', env.namespace, '--kubeconfig', env.cluster.kubeconfigPath]);
  return stdout;
}

const revision = (what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 60_000) =>
  waitForRevision(kn, 'demo-00001', what, ok, { timeoutMs, logs: serving.controllerLog });

test.serial(
  'kn revision describe names the holding hook, its progress and message; after a failure the reason and the retry command',
  async (t) => {
    const hook = `${env.instance}-migrate`;
    const revisions = await watchCollection<KnativeObject>(env.admin, `/apis/serving.knative.dev/v1/namespaces/${env.namespace}/revisions`);
    t.teardown(() => revisions.stop());
    await kn.createService('demo', { annotations: { [KEY]: 'on' } });

    const held = await revision('the gate’s condition to show the progress', (r) =>
      (condition(r, PRESTART_CONDITION)?.reason ?? '').includes('40%'),
    );
    const mine = condition(held, PRESTART_CONDITION);
    t.is(mine?.status, 'Unknown');
    t.is(severity(held), 'Info');
    t.not(condition(held, 'Ready')?.status, 'False', `Knative's Ready is not False (${conditionsLine(held)})`);

    const plain = await knCli('revision', 'describe', 'demo-00001');
    t.log(plain);
    t.regex(
      plain,
      new RegExp(`\\?\\? +${PRESTART_CONDITION} +\\S+ +${hook} Requested 40%, deadline \\d\\d:\\d\\d:\\d\\dZ: migrating table 3/7`),
    );
    const verbose = await knCli('revision', 'describe', 'demo-00001', '--verbose');
    t.regex(verbose, new RegExp(`${hook} Requested, attempt 1, 40%, deadline \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z: migrating table 3/7`));
    t.regex(verbose, new RegExp(`details: kn prestart get demo-00001 -n ${env.namespace}`));

    const go = await waitFor(() => finish, { timeoutMs: 30_000, what: 'the hook to be waiting' });
    go('quota exceeded');
    const failed = await revision('the gate’s condition to show the failure', (r) => condition(r, PRESTART_CONDITION)?.status === 'False');
    t.is(severity(failed), 'Info');
    const afterFailure = await knCli('revision', 'describe', 'demo-00001');
    t.log(afterFailure);
    t.regex(
      afterFailure,
      new RegExp(
        ` I +${PRESTART_CONDITION} +\\S+ +hook ${hook} failed: quota exceeded; retry: kn prestart retry demo-00001 -n ${env.namespace}`,
      ),
    );
    const described = await kubectl('describe', 'revision', 'demo-00001');
    t.regex(described, new RegExp(`Type: +${PRESTART_CONDITION}`));
    t.regex(described, /quota exceeded; retry: kn prestart retry demo-00001/);

    // Knative reconciles the held Revision again (a label change wakes it at once; its generated
    // reconciler writes the status it computed from its copy, which carries the gate's condition):
    // the condition is still there and Ready is still not False. Its InternalError events are
    // rate-limited by client-go's spam filter by now, so its log tells that it reconciled.
    const reconciles = async () =>
      (await readFile(serving.controllerLog, 'utf8'))
        .split('\n')
        .filter(
          (l) =>
            l.includes(`"knative.dev/key":"${env.namespace}/demo-00001"`) &&
            l.includes('serving.knative.dev.Revision') &&
            l.includes('Reconcile'),
        ).length;
    const before = await reconciles();
    await env.custom.patchNamespacedCustomObject(
      {
        group: 'serving.knative.dev',
        version: 'v1',
        plural: 'revisions',
        namespace: env.namespace,
        name: 'demo-00001',
        body: { metadata: { labels: { 'kn-view/poke': '1' } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await waitFor(async () => (await reconciles()) > before || undefined, {
      timeoutMs: 60_000,
      what: `Knative to reconcile the Revision again (${serving.controllerLog})`,
    });
    const later = await revision('still held after Knative reconciled it', () => true);
    t.is(condition(later, PRESTART_CONDITION)?.status, 'False', conditionsLine(later));
    t.is(severity(later), 'Info');
    t.not(condition(later, 'Ready')?.status, 'False', `Knative's Ready is not False (${conditionsLine(later)})`);
  },
);
