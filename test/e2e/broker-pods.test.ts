// The Broker road with everything as pods on the real node: Knative Serving and Knative Eventing
// from their release manifests (devcluster/knative-serving-pods.ts, knative-eventing-pods.ts: MT
// channel-based Broker over the InMemoryChannel, found by cluster DNS, no DNS stand-in, no network
// namespace of ours), knative-prestart installed from its release (test/e2e/_gate-pods-setup.ts),
// and the example hook (examples/typescript-binding-hook) deployed as a Knative Service from
// examples/typescript-binding-hook/knative/service.yaml, its image built by build-image.sh there.
//
// Checked: the PrestartHook, made to match every Revision (so it would match the hook Service's
// own), does not hold the hook Service's Revision (it runs in the gate's namespace, which the
// gate's webhook and stamp policy leave out: docs/hooks.md, "A hook that runs on Knative"); a
// Knative Service of a tenant is held with no pod; the gate's request reaches the hook's Knative
// Service through the Broker and the Trigger the gate made; the hook's progress and outcome come
// back through the Broker (its K_SINK) and the gate's reply Trigger; the gate releases; the app's
// pod answers through the activator with the Secret the hook made in its environment.
// Then the hazard that namespace avoids: the same hook Service deployed in a tenant namespace, as
// the subscriber of a PrestartHook matching its own Revisions, is held waiting for a hook that
// cannot run (its only copy is the held Revision itself).
//
// Stand-ins: no networking layer runs. devcluster/ingress-route-stand-in.ts marks Ingresses Ready
// with the cluster-local name of the one Revision they route to, so the Trigger's delivery to the
// hook Service's address reaches that Revision's pods (hence the hook Service's
// target-burst-capacity 0, added here: see that file); the app is reached through the activator
// with the Revision in the headers, as an ingress would send it.
// Needs: root, `build-binaries.sh node knative-serving-images knative-eventing-images`, `npm run
// image` (the hook's image is built from it here, by examples/typescript-binding-hook/knative/build-image.sh).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { applyManifests, parseManifests } from '@knative-prestart/devcluster/apply.ts';
import { cacheDir } from '@knative-prestart/devcluster/binaries.ts';
import { hookMethods } from '@knative-prestart/devcluster/gate/hooks.ts';
import { startIngressRouteStandIn } from '@knative-prestart/devcluster/ingress-route-stand-in.ts';
import {
  EVENTING_NAMESPACE,
  type KnativeEventingPods,
  startKnativeEventingPods,
} from '@knative-prestart/devcluster/knative-eventing-pods.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { replyTriggerName, requestTriggerName } from '../../triggers/names.ts';
import { createKnativeService, knativeServiceReady, prestartRuns, throughActivator } from '../support/knative-service.ts';
import {
  checkPrerequisites,
  GATE_NS,
  type GatePodsEnv,
  type ImageInfo,
  type Installed,
  installRelease,
  removeRelease,
  startGatePodsEnv,
} from './_gate-pods-setup.ts';

const APPS = 'broker-pods-e2e';
const HOOK = 'provision-db';
const EXAMPLE = 'examples/typescript-binding-hook/knative/service.yaml';
const BUILD_HOOK_IMAGE = 'examples/typescript-binding-hook/knative/build-image.sh';
const run = promisify(execFile);
const HOOK_IMAGE_INFO = join(cacheDir(), 'images', 'typescript-binding-hook-0.1.0.json');
function hookImage(): ImageInfo {
  if (!existsSync(HOOK_IMAGE_INFO))
    throw new Error(`no hook image (${HOOK_IMAGE_INFO} missing): run examples/typescript-binding-hook/knative/build-image.sh`);
  return JSON.parse(readFileSync(HOOK_IMAGE_INFO, 'utf8')) as ImageInfo;
}
let env: GatePodsEnv | undefined;
let eventing: KnativeEventingPods | undefined;
let installed: Installed | undefined;
let routes: { stop(): void } | undefined;
const say = (line: string) => process.stdout.write(`broker-pods: ${line}\n`);
const seconds = (since: number) => `${((performance.now() - since) / 1000).toFixed(1)}s`;

type Obj = {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
};

/** The example's objects as a user applies them, with the image they pushed (here: the one imported into the node, by digest). */
function exampleObjects(): Obj[] {
  const image = hookImage();
  const byDigest = `${image.reference.replace(/:[^/:]+$/, '')}@${image.digest}`;
  return parseManifests(
    readFileSync(EXAMPLE, 'utf8').replaceAll('REGISTRY/knative-prestart/typescript-binding-hook@sha256:DIGEST', byDigest),
  ) as Obj[];
}

/** The example's Knative Service in `namespace`, with the annotation the routing stand-in needs. */
function hookService(namespace: string): Obj {
  const svc = structuredClone(exampleObjects().find((o) => o.kind === 'Service' && o.metadata.name === HOOK)) as Obj & {
    spec: { template: { metadata: { annotations: Record<string, string> } } };
  };
  svc.metadata.namespace = namespace;
  // For devcluster/ingress-route-stand-in.ts (no networking layer here): served by its pod, never through the activator.
  svc.spec.template.metadata.annotations['autoscaling.knative.dev/target-burst-capacity'] = '0';
  return svc;
}

test.before(async () => {
  checkPrerequisites();
  // The hook's image, on the gate's image of `npm run image`: built each run (about 5 s), so it
  // holds the example as it is now.
  const t0 = performance.now();
  await run(BUILD_HOOK_IMAGE, [], { timeout: 120_000 });
  say(`hook image built in ${seconds(t0)}: ${hookImage().digest}`);
  env = await startGatePodsEnv({ progress: say });
  eventing = await startKnativeEventingPods(env.cluster, env.node, { progress: say });
  await env.createNamespace(APPS);
  routes = startIngressRouteStandIn(env.cluster.kubeConfig, [GATE_NS]);
  installed = await installRelease(env);
  say(`gate installed and rolled out in ${installed.installSeconds.toFixed(1)}s`);
});

test.after.always(async () => {
  routes?.stop();
  await eventing?.stop();
  await env?.stop();
  removeRelease(installed);
});

test.serial(
  "Knative Eventing's release runs as pods on the real node; the example's Broker is Ready at its cluster-DNS address",
  async (t) => {
    if (!env || !eventing) return t.fail('no cluster');
    const { cluster, node } = env;
    say(`Knative Eventing (pods) started in ${eventing.startSeconds.toFixed(1)}s`);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const pods = (await core.listNamespacedPod({ namespace: EVENTING_NAMESPACE })).items;
    const ready = pods.filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    t.true(ready.length >= 7, pods.map((p) => `${p.metadata?.name} ${p.status?.phase}`).join(', '));
    t.true(pods.every((p) => p.spec?.nodeName === node.name));
    t.true(
      pods.every((p) => p.spec?.containers.every((c) => c.image?.startsWith('dev.local/knative/eventing/'))),
      pods.map((p) => p.spec?.containers.map((c) => c.image).join(' ')).join(', '),
    );

    await node.importImages([{ archive: hookImage().archive, ref: hookImage().reference, digest: hookImage().digest }]);
    // The example's RBAC and Broker as they ship: Eventing's webhook defaults the Broker's class and channel.
    await applyManifests(
      cluster.kubeConfig,
      exampleObjects()
        .filter((o) => ['ServiceAccount', 'ClusterRole', 'Broker'].includes(o.kind))
        .map((o) => JSON.stringify(o))
        .join('\n---\n'),
    );
    const broker = await waitFor(
      async () => {
        const b = (await cluster.kubeConfig.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
          group: 'eventing.knative.dev',
          version: 'v1',
          namespace: GATE_NS,
          plural: 'brokers',
          name: 'default',
        })) as {
          metadata: { annotations?: Record<string, string> };
          status?: { address?: { url?: string }; conditions?: { type: string; status: string }[] };
        };
        return b.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? b : undefined;
      },
      { what: `Broker ${GATE_NS}/default Ready`, timeoutMs: 60_000, intervalMs: 250 },
    );
    t.is(broker.metadata.annotations?.['eventing.knative.dev/broker.class'], 'MTChannelBasedBroker');
    t.is(broker.status?.address?.url, eventing.ingressUrl(GATE_NS, 'default'));
    say(`Broker Ready at ${broker.status?.address?.url}`);
  },
);

test.serial(
  "a hook matching every Revision leaves its own Knative Service alone; a tenant's Service is held, the hook answers through the Broker, the app answers through the activator",
  async (t) => {
    if (!env || !installed) return t.fail('no gate installed');
    const { cluster, node } = env;
    const kc = cluster.kubeConfig;
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const hook = exampleObjects().find((o) => o.kind === 'PrestartHook') as Obj;
    // Every Revision: the tenant's, and the hook Service's own were it not in the gate's namespace.
    hook.spec = { ...hook.spec, match: {} };
    await applyManifests(kc, JSON.stringify(hook));
    await hookMethods(kc, APPS).waitUntilStamped(HOOK, {});

    const t0 = performance.now();
    await applyManifests(kc, JSON.stringify(hookService(GATE_NS)));
    const hookSvc = await knativeServiceReady(kc, GATE_NS, HOOK, 120_000);
    const hookRev = hookSvc.status?.latestReadyRevisionName ?? '';
    say(`the hook's Knative Service Ready ${seconds(t0)} after its create, its Revision ${hookRev} unheld`);
    const rev = (await custom.getNamespacedCustomObject({
      group: 'serving.knative.dev',
      version: 'v1',
      namespace: GATE_NS,
      plural: 'revisions',
      name: hookRev,
    })) as Obj & { metadata: { labels?: Record<string, string> } };
    t.is(rev.metadata.labels?.['prestart.dev/hold'], undefined, 'the hook Service’s Revision carries no hold');
    const gateNsRuns = (await custom.listNamespacedCustomObject({
      group: 'prestart.dev',
      version: 'v1alpha1',
      namespace: GATE_NS,
      plural: 'prestartruns',
    })) as { items: unknown[] };
    t.is(gateNsRuns.items.length, 0, 'no PrestartRun in the gate’s namespace');

    // The gate's Triggers on the example's Broker: the hook's requests to the Knative Service, the replies to the gate.
    const byName = await waitFor(
      async () => {
        const list = (await custom.listNamespacedCustomObject({
          group: 'eventing.knative.dev',
          version: 'v1',
          namespace: GATE_NS,
          plural: 'triggers',
        })) as {
          items: { metadata: { name: string }; status?: { subscriberUri?: string; conditions?: { type: string; status: string }[] } }[];
        };
        const ready = list.items.filter((tr) => tr.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True');
        // By name, the address each delivers to (waitFor takes one value, not a list).
        return ready.length === 2 ? new Map(ready.map((tr) => [tr.metadata.name, tr.status?.subscriberUri])) : undefined;
      },
      { what: "the gate's two Triggers Ready", timeoutMs: 60_000, intervalMs: 250 },
    );
    t.is(byName.get(requestTriggerName(HOOK)), `http://${HOOK}.${GATE_NS}.svc.cluster.local`);
    t.is(byName.get(replyTriggerName('default')), `http://knative-prestart-gate.${GATE_NS}.svc/`);

    await kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: APPS,
      body: {
        metadata: { name: 'prestart-hook-provision-db' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-hook-provision-db-namespace' },
        subjects: [{ kind: 'ServiceAccount', name: 'prestart-hook-provision-db', namespace: GATE_NS }],
      },
    });
    const t1 = performance.now();
    await createKnativeService(kc, APPS, 'orders', node.images.testApp);
    // Held, and the hook's progress (sent by the hook's pod to the Broker) is in the PrestartRun.
    const held = await waitFor(
      async () => {
        const [r] = await prestartRuns(kc, APPS);
        const msg = r?.status?.hooks?.[0]?.message;
        return r && msg ? { name: r.metadata.name, msg } : undefined;
      },
      { what: 'a PrestartRun of Service orders with the hook’s progress', timeoutMs: 90_000, intervalMs: 100 },
    );
    say(`held ${seconds(t1)} after the create: PrestartRun ${held.name}: ${held.msg}`);
    t.regex(held.msg, /^orders: /, 'the example hook’s own progress words');
    const whileHeld = (await core.listNamespacedPod({ namespace: APPS, labelSelector: 'serving.knative.dev/service=orders' })).items;
    t.is(whileHeld.length, 0, 'a held Revision has no pod');

    const ready = await knativeServiceReady(kc, APPS, 'orders', 120_000);
    say(`released and Ready ${seconds(t1)} after the create`);
    const secret = await core.readNamespacedSecret({ namespace: APPS, name: 'app-db' });
    t.truthy(secret.data?.uri, 'the hook stored the credentials');
    const res = await throughActivator(kc, APPS, ready.status?.latestReadyRevisionName ?? '', '/orders');
    t.is(res.status, 200);
    const answer = (await res.json()) as { env: Record<string, string> };
    t.is(answer.env.DATABASE_URL, Buffer.from(secret.data?.uri ?? '', 'base64').toString('utf8'));
    say(`through the activator: DATABASE_URL=${answer.env.DATABASE_URL}`);
  },
);

test.serial(
  'the hazard the gate’s namespace avoids: a hook Service in a namespace its own hook matches is held waiting for itself',
  async (t) => {
    if (!env || !installed) return t.fail('no gate installed');
    const kc = env.cluster.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const LONE = 'lone-hook';
    // A hook served by the Knative Service `lone-hook` of the tenant namespace, matching that Service's Revisions.
    const hook = exampleObjects().find((o) => o.kind === 'PrestartHook') as Obj;
    hook.metadata.name = 'self-held';
    hook.spec = {
      ...hook.spec,
      match: {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': APPS } },
        revisionSelector: { matchLabels: { 'serving.knative.dev/service': LONE } },
      },
      delivery: {
        transport: 'broker',
        broker: { name: 'default', namespace: GATE_NS, subscriber: { uri: `http://${LONE}.${APPS}.svc.cluster.local` } },
      },
    };
    await applyManifests(kc, JSON.stringify(hook));
    const svc = hookService(APPS);
    svc.metadata.name = LONE;
    await applyManifests(kc, JSON.stringify(svc));
    // The other hook (provision-db, served from the gate's namespace) answers; self-held was sent its request and cannot be answered.
    const stuck = await waitFor(
      async () => {
        const r = (await prestartRuns(kc, APPS)).find((x) => x.status?.hooks?.some((h) => h.name === 'self-held'));
        const phases = new Map(r?.status?.hooks?.map((h) => [h.name, h]));
        return phases.get(HOOK)?.phase === 'Succeeded' && phases.get('self-held')?.requestedAt ? r : undefined;
      },
      { what: `the PrestartRun of ${LONE} with ${HOOK} answered and self-held requested`, timeoutMs: 90_000, intervalMs: 250 },
    );
    const self = stuck.status?.hooks?.find((h) => h.name === 'self-held');
    say(`held: PrestartRun ${stuck.metadata.name}: ${stuck.status?.hooks?.map((h) => `${h.name} ${h.phase}`).join(', ')}`);
    t.is(self?.phase, 'Requested');
    t.not(stuck.status?.phase, 'Released');
    const pods = (await core.listNamespacedPod({ namespace: APPS, labelSelector: `serving.knative.dev/service=${LONE}` })).items;
    t.is(pods.length, 0, 'the only pod that could answer self-held is the one it holds');
  },
);
