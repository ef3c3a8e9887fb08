// knative-prestart installed as the README's Install section says, on the real node beside Knative
// Serving's pods (devcluster/knative-serving-pods.ts): the image of `npm run image` (its OCI
// archive, imported into the node's containerd: the node's "registry"), `npm run release -- --out
// DIR` (the digest pinned), `kubectl apply --server-side -f knative-prestart.yaml` and `kubectl
// rollout status`. Checked: two gate replicas Ready as pods on the real node, the gate's webhooks
// called through its Service (registered by Service reference), and a Knative Service that no
// PrestartHook matches becomes Ready with the gate in the admission path. Then the hooks file
// (`kubectl apply --server-side -f knative-prestart-hooks.yaml`, the README's RoleBinding for the
// secret hook): the seed's flow with the real kn, `kn service create bound --annotation
// prestart.dev/database=orders`: the Service is held (its PrestartRun says the hook waits for the
// Secret; no pod of it exists), kn returns once the Secret exists and the Revision is released and
// Ready, and `curl` through the activator gets the app's answer with the binding in its environment.
// Needs: root, `build-binaries.sh node knative-serving-images kn`, `npm run image`, curl.

import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { knBinary } from '@knative-prestart/devcluster/kn.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import test from 'ava';
import {
  createDbCredentialsHook,
  GATE_NS,
  type GatePodsEnv,
  type Installed,
  installRelease,
  installSecretHook,
  removeRelease,
  startGatePodsEnv,
} from './_gate-pods-setup.ts';

const NS = 'gate-pods-e2e';
const run = promisify(execFile);

/** The real kn, started now; resolves when it exits, with what it printed. */
function runKn(args: string[], kubeconfig: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(knBinary(), [...args, '--kubeconfig', kubeconfig], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString('utf8');
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString('utf8');
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}
let env: GatePodsEnv | undefined;
let installed: Installed | undefined;
const say = (line: string) => process.stdout.write(`gate-pods: ${line}\n`);

test.before(async () => {
  env = await startGatePodsEnv({ progress: say });
  await env.createNamespace(NS);
});

test.after.always(async () => {
  await env?.stop();
  removeRelease(installed);
});

test.serial('the release installs the gate as two pods on the real node; a Knative Service no hook matches becomes Ready', async (t) => {
  if (!env) return t.fail('no cluster');
  const { cluster, node } = env;
  installed = await installRelease(env);
  const info = installed.image;
  say(`gate installed and rolled out ${installed.installSeconds.toFixed(1)}s after the image import started`);

  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const pods = (await core.listNamespacedPod({ namespace: GATE_NS })).items.filter((p) =>
    p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  t.true(
    pods.filter((p) => p.metadata?.name?.startsWith('knative-prestart-gate-')).length >= 2,
    pods.map((p) => p.metadata?.name).join(' '),
  );
  t.true(pods.every((p) => p.spec?.nodeName === node?.name));
  t.true(pods.every((p) => (p.spec?.containers[0]?.image ?? '').endsWith(info.digest)));

  const hooks = (
    await kubeRequest(cluster.kubeConfig, 'GET', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/knative-prestart')
  ).body as { webhooks: { clientConfig: { url?: string; service?: { name: string } } }[] };
  t.true(hooks.webhooks.every((w) => w.clientConfig.url === undefined && w.clientConfig.service?.name === 'knative-prestart-gate'));

  const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  const t1 = performance.now();
  await custom.createNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    namespace: NS,
    plural: 'services',
    body: {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Service',
      metadata: { name: 'plain' },
      spec: { template: { spec: { containers: [{ image: node.images.testApp }] } } },
    },
  });
  await waitFor(
    async () => {
      const s = (await custom.getNamespacedCustomObject({
        group: 'serving.knative.dev',
        version: 'v1',
        namespace: NS,
        plural: 'services',
        name: 'plain',
      })) as { status?: { conditions?: { type: string; status: string; message?: string }[] } };
      const r = s.status?.conditions?.find((c) => c.type === 'Ready');
      if (r?.status === 'True') return true;
      throw new Error(`Ready ${r?.status ?? 'absent'}: ${r?.message ?? ''}`);
    },
    { what: 'Knative Service plain Ready with the gate installed', timeoutMs: 120_000, intervalMs: 250 },
  );
  say(`Knative Service Ready ${((performance.now() - t1) / 1000).toFixed(1)}s after its create, the gate in the path`);
});

test.serial(
  'with the hooks file: a Service bound by the secret hook is held with no pod, then released with its binding, answering through the activator',
  async (t) => {
    if (!env || !installed) return t.fail('no gate installed');
    const { cluster, node } = env;
    const t0 = performance.now();
    await installSecretHook(env, installed, [NS]);
    say(`hooks file applied, the secret hook rolled out in ${((performance.now() - t0) / 1000).toFixed(1)}s`);

    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    await createDbCredentialsHook(env, '{{service}}-db');
    const svcApi = { group: 'serving.knative.dev', version: 'v1', namespace: NS, plural: 'services' };
    const t1 = performance.now();
    // The seed's flow, typed as a user types it: kn waits until the Service is Ready, which it is
    // only once the hook released its Revision.
    const kn = runKn(
      [
        'service',
        'create',
        'bound',
        '-n',
        NS,
        '--image',
        node.images.testApp,
        '--annotation',
        'prestart.dev/database=orders',
        '--wait-timeout',
        '240',
      ],
      cluster.kubeconfigPath,
    );
    // Held: the Revision exists, its hook waits for the Secret, and no pod of it runs.
    const held = await waitFor(
      async () => {
        const runs = (await custom.listNamespacedCustomObject({
          group: 'prestart.dev',
          version: 'v1alpha1',
          namespace: NS,
          plural: 'prestartruns',
        })) as {
          items: { metadata: { name: string }; status?: { hooks?: { message?: string }[] } }[];
        };
        const r = runs.items[0];
        const msg = r?.status?.hooks?.[0]?.message ?? '';
        return msg ? { name: r?.metadata.name ?? '', msg } : undefined;
      },
      { what: 'a PrestartRun of Service bound whose hook reports progress', timeoutMs: 60_000, intervalMs: 250 },
    );
    say(`held: PrestartRun ${held.name}: ${held.msg}`);
    const podsWhileHeld = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'serving.knative.dev/service=bound' })).items;
    t.is(podsWhileHeld.length, 0, 'a held Revision has no pod');

    const t2 = performance.now();
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 'bound-db' }, stringData: { uri: 'postgres://orders.example/db' } },
    });
    const knDone = await kn;
    t.is(knDone.code, 0, `kn service create: ${knDone.stdout}${knDone.stderr}`);
    t.regex(knDone.stdout, /Service 'bound' created to latest revision 'bound-\S+' is available at URL:/);
    say(
      `kn service create returned (Service Ready) ${((performance.now() - t2) / 1000).toFixed(1)}s after the Secret was created (${((performance.now() - t1) / 1000).toFixed(1)}s after kn started)`,
    );
    const ready = (await custom.getNamespacedCustomObject({ ...svcApi, name: 'bound' })) as {
      status?: { latestReadyRevisionName?: string };
    };
    const rev = ready.status?.latestReadyRevisionName ?? '';
    const activator = await core.readNamespacedService({ name: 'activator-service', namespace: 'knative-serving' });
    // curl, as a user would, through the activator (no networking layer runs: the headers are
    // what an Ingress would add for the Revision).
    const { stdout } = await run(
      'curl',
      [
        '-sS',
        '--fail',
        '--max-time',
        '60',
        '-H',
        `Knative-Serving-Revision: ${rev}`,
        '-H',
        `Knative-Serving-Namespace: ${NS}`,
        `http://${activator.spec?.clusterIP}:80/bound`,
      ],
      { timeout: 70_000 },
    );
    const answer = JSON.parse(stdout) as { env: Record<string, string> };
    t.is(answer.env.DATABASE_URL, 'postgres://orders.example/db');
    say(`through the activator: DATABASE_URL=${answer.env.DATABASE_URL}`);
  },
);
