// Knative Serving's data plane as pods on the real node (devcluster/knative-serving-pods.ts): the
// module's release manifests with images built here, on a control plane of this file's own whose
// only node is the real one. Knative's controller, webhook (called through its Service), activator
// and KPA autoscaler are Ready as pods; a Knative Service of the test app, with no autoscaling
// annotation (KPA, the default class), becomes Ready and its pod answers through the Revision's
// private Service; once the KPA scaled it to zero, a request to the activator's Service, routed by
// the Knative-Serving-Revision/-Namespace headers (the activator's context handler), brings a pod
// back and is answered. Stand-in: the Ingress status (startIngressStandIn, no networking layer).
// Test setting: config-autoscaler stable-window and scale-to-zero-grace-period 6 s (the minimum;
// defaults 60 s and 30 s) so scale to zero takes seconds, not minutes.

import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { startIngressStandIn } from '@knative-prestart/devcluster/knative-client.ts';
import {
  KNATIVE_NAMESPACE,
  type KnativeServingPods,
  SERVING_DEPLOYMENTS,
  startKnativeServingPods,
} from '@knative-prestart/devcluster/knative-serving-pods.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { type RealNode, realNodeUnavailable, startNode } from '@knative-prestart/devcluster/node.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AppsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import test from 'ava';

const NS = 'serving-pods-e2e';
let cluster: Cluster | undefined;
let node: RealNode | undefined;
let serving: KnativeServingPods | undefined;
let ingress: { stop(): void } | undefined;
const say = (line: string) => process.stdout.write(`serving-pods: ${line}\n`);

test.before(async () => {
  const unavailable = realNodeUnavailable();
  if (unavailable) throw new Error(unavailable);
  const t0 = performance.now();
  cluster = await startCluster({ nodes: 0, progress: say });
  node = await startNode(cluster, { taint: false, progress: say });
  serving = await startKnativeServingPods(cluster, node, {
    progress: say,
    configOverrides: { 'config-autoscaler': { 'stable-window': '6s', 'scale-to-zero-grace-period': '6s' } },
  });
  say(
    `Knative Ready ${((performance.now() - t0) / 1000).toFixed(1)}s after the start (cluster, node, Knative ${serving.startSeconds.toFixed(1)}s)`,
  );
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  ingress = startIngressStandIn(cluster.kubeConfig, NS);
});

test.after.always(async () => {
  ingress?.stop();
  await serving?.stop();
  await node?.stop();
  await cluster?.stop();
});

const ksvc = { group: 'serving.knative.dev', version: 'v1', namespace: NS, plural: 'services' };
type Conditioned = { status?: { conditions?: { type: string; status: string; message?: string }[]; latestReadyRevisionName?: string } };
const ready = (o: Conditioned) => o.status?.conditions?.find((c) => c.type === 'Ready');

async function getJson(url: string, headers: Record<string, string> = {}, timeoutMs = 3000) {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
  return (await res.json()) as { hostname: string; env: Record<string, string>; path: string };
}

test.serial(
  "Knative's controller, webhook, activator and autoscaler run as pods; the webhook is registered by Service reference",
  async (t) => {
    if (!cluster || !node) return t.fail('no cluster');
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    for (const app of SERVING_DEPLOYMENTS) {
      const pods = (await core.listNamespacedPod({ namespace: KNATIVE_NAMESPACE, labelSelector: `app=${app}` })).items;
      t.true(
        pods.some((p) => p.spec?.nodeName === node?.name && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
        `a Ready ${app} pod on ${node.name}`,
      );
    }
    const res = await kubeRequest(
      cluster.kubeConfig,
      'GET',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/webhook.serving.knative.dev',
    );
    const cfg = res.body as {
      webhooks: { clientConfig: { url?: string; service?: { name: string; namespace: string }; caBundle?: string } }[];
    };
    t.is(cfg.webhooks[0]?.clientConfig.url, undefined);
    t.deepEqual(
      { name: cfg.webhooks[0]?.clientConfig.service?.name, namespace: cfg.webhooks[0]?.clientConfig.service?.namespace },
      { name: 'webhook', namespace: KNATIVE_NAMESPACE },
    );
    t.truthy(cfg.webhooks[0]?.clientConfig.caBundle, 'the webhook wrote its CA into its configuration');
  },
);

test.serial(
  'a Knative Service (KPA) becomes Ready, answers through its private Service, and from zero through the activator',
  async (t) => {
    if (!cluster || !node) return t.fail('no cluster');
    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const t0 = performance.now();
    await custom.createNamespacedCustomObject({
      ...ksvc,
      body: {
        apiVersion: 'serving.knative.dev/v1',
        kind: 'Service',
        metadata: { name: 'hello' },
        spec: {
          template: {
            spec: {
              containers: [{ image: node.images.testApp, env: [{ name: 'GREETING', value: 'hello from a Knative pod' }] }],
            },
          },
        },
      },
    });
    const svc = await waitFor(
      async () => {
        const s = (await custom.getNamespacedCustomObject({ ...ksvc, name: 'hello' })) as Conditioned;
        const r = ready(s);
        if (r?.status === 'True') return s;
        throw new Error(`Ready ${r?.status ?? 'absent'}: ${r?.message ?? ''}`);
      },
      { what: 'Knative Service hello Ready', timeoutMs: 120_000, intervalMs: 250 },
    );
    const serviceReady = (performance.now() - t0) / 1000;
    say(`Knative Service Ready ${serviceReady.toFixed(1)}s after its create`);
    const rev = svc.status?.latestReadyRevisionName ?? '';
    t.truthy(rev);
    const pa = (await custom.getNamespacedCustomObject({
      group: 'autoscaling.internal.knative.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'podautoscalers',
      name: rev,
    })) as { metadata: { annotations?: Record<string, string> } };
    t.is(pa.metadata.annotations?.['autoscaling.knative.dev/class'], 'kpa.autoscaling.knative.dev');

    const priv = await core.readNamespacedService({ name: `${rev}-private`, namespace: NS });
    const port = priv.spec?.ports?.find((p) => p.name === 'http')?.port ?? 80;
    const viaPrivate = await waitFor(() => getJson(`http://${priv.spec?.clusterIP}:${port}/via-private`), {
      what: `the private Service of ${rev} answering`,
      timeoutMs: 30_000,
    });
    t.is(viaPrivate.env.GREETING, 'hello from a Knative pod');
    t.is(viaPrivate.path, '/via-private');
    t.is(viaPrivate.env.K_REVISION, rev);

    // Scale to zero by the KPA (no traffic for the stable window and the grace period).
    const t1 = performance.now();
    await waitFor(
      async () => {
        const d = await apps.readNamespacedDeployment({ name: `${rev}-deployment`, namespace: NS });
        const pods = (await core.listNamespacedPod({ namespace: NS, labelSelector: `serving.knative.dev/revision=${rev}` })).items;
        if (d.spec?.replicas === 0 && pods.length === 0) return true;
        throw new Error(`replicas ${d.spec?.replicas}, ${pods.length} pods`);
      },
      { what: `${rev} scaled to zero by the KPA`, timeoutMs: 120_000, intervalMs: 500 },
    );
    say(`scaled to zero ${((performance.now() - t1) / 1000).toFixed(1)}s after the last request`);

    const activator = await core.readNamespacedService({ name: 'activator-service', namespace: KNATIVE_NAMESPACE });
    const t2 = performance.now();
    const cold = await getJson(
      `http://${activator.spec?.clusterIP}:80/via-activator`,
      { 'Knative-Serving-Revision': rev, 'Knative-Serving-Namespace': NS },
      60_000,
    );
    const coldSeconds = (performance.now() - t2) / 1000;
    say(`cold start through the activator: ${coldSeconds.toFixed(2)}s (pod ${cold.hostname})`);
    t.is(cold.path, '/via-activator');
    t.is(cold.env.K_REVISION, rev);
    const pods = (await core.listNamespacedPod({ namespace: NS, labelSelector: `serving.knative.dev/revision=${rev}` })).items;
    t.true(pods.some((p) => p.metadata?.name === cold.hostname));
    t.log(`Service Ready ${serviceReady.toFixed(1)}s, cold start through the activator ${coldSeconds.toFixed(2)}s`);
  },
);

test.serial("stop() of Knative's pods and the node leaves nothing of the node on the host", async (t) => {
  if (!node || !serving) return t.fail('no node');
  const t0 = performance.now();
  await serving.stop();
  await node.stop();
  t.deepEqual(node.leftovers(), []);
  say(`Knative and the node stopped in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
});
