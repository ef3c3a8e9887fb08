// End to end through Knative Eventing's real Broker (devcluster/knative-eventing.ts): the gate
// sends a Knative-created Revision's request to the Broker's ingress, the Trigger the gate itself
// created delivers it to a hook written with the SDK, the hook answers 202, reports progress and
// its outcome to K_SINK (the Broker), and the gate's reply Trigger brings them back to the gate's
// sink. Real here: Knative Serving's and Eventing's controllers, the MT broker ingress and filter,
// the InMemoryChannel dispatcher, Kubernetes' controllers, the gate. Stand-ins: cluster DNS (the
// service proxy, devcluster/service-proxy.ts) and, as in serving.test.ts, no networking layer.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import {
  condition,
  firstSighting,
  Knative,
  type KnativeObject,
  readyPodOf,
  waitForRevision,
  watchCollection,
} from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeEventing, startKnativeEventing } from '@knative-prestart/devcluster/knative-eventing.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import type { V1Deployment } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import { CancelledError, envContribution, type HookServer, serveHook, succeed, volumeContribution } from '../../hooks/index.ts';

const BINDING = 'serving-binding';
const BROKER = 'default';

let env: GateEnv;
let serving: KnativeServing;
let eventing: KnativeEventing;
let kn: Knative;
let hook: HookServer;
let hookName: string;

/** What the hook saw, by Revision: its requests, and the cancels that aborted its work. */
const seen = new Map<string, { requests: number; cancelled?: string }>();
/** Per Revision: lets the hook finish its work (the test decides when the database "exists"). */
const finish = new Map<string, () => void>();

test.before(async () => {
  const progress = (line: string) => process.stderr.write(`e2e: ${line}\n`);
  env = await gateEnv('bus', { inProcess: false });
  serving = await startKnativeServing(env.cluster, { progress });
  eventing = await startKnativeEventing(env.cluster, { progress });
  kn = new Knative(env.admin, env.namespace);
  await eventing.createBroker(env.namespace, BROKER);

  // The gate keeps the Triggers (their subscriber: its sink) and sends through the proxy that
  // resolves the Broker's cluster-local address, as cluster DNS would in a pod.
  const [sinkPort] = (await freePorts(1)) as [number];
  await env.startGate({
    sink: { host: '127.0.0.1', port: sinkPort, maxBytes: 64 * 1024 },
    triggers: { replyUri: `http://127.0.0.1:${sinkPort}/events`, namespaces: [env.namespace] },
    broker: { proxy: eventing.proxyUrl },
  });

  // A hook written with the SDK: 202 at once, progress and outcome later to K_SINK, the Broker.
  hookName = `${env.instance}-db`;
  hook = await serveHook({
    name: hookName,
    host: '127.0.0.1',
    port: 0,
    sink: eventing.ingressUrl(env.namespace, BROKER),
    logger: pino({ name: 'bus-hook', level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
    handler: async (req, ctx) => {
      const entry = seen.get(req.revision.name) ?? { requests: 0 };
      entry.requests++;
      seen.set(req.revision.name, entry);
      ctx.signal.addEventListener('abort', () => {
        if (ctx.signal.reason instanceof CancelledError) entry.cancelled = ctx.signal.reason.message;
      });
      await ctx.progress(50, `${req.revision.name}: creating the database`);
      await new Promise<void>((resolve, reject) => {
        finish.set(req.revision.name, resolve);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      });
      return succeed(`database for ${req.revision.name} ready`, [
        envContribution('db-env', 'bus-db', { DATABASE_URL: 'url' }),
        volumeContribution('db', 'bus-db'),
      ]);
    },
  });
  await env.createHook(hookName, {
    match: env.annotationMatch(BINDING, 'bus-db'),
    contributions: { allowed: ['env', 'volume'] },
    timeout: '5m',
    delivery: { transport: 'broker', broker: { name: BROKER, namespace: env.namespace, subscriber: { uri: hook.url } } },
  });
  await env.waitUntilStamped(hookName, { [BINDING]: 'bus-db' });
  await env.core.createNamespacedSecret({
    namespace: env.namespace,
    body: { metadata: { name: 'bus-db' }, stringData: { url: 'postgres://bus-db.db.internal/app' } },
  });
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
  await eventing?.stop();
  await serving?.stop();
});

interface TriggerObject {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { subscriber: { uri?: string } };
  status?: { conditions?: { type: string; status: string; message?: string }[] };
}

const revision = (name: string, what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 30_000) =>
  waitForRevision(kn, name, what, ok, { timeoutMs });

function finishWork(revision: string): Promise<void> {
  return waitFor(() => finish.get(revision), { timeoutMs: 30_000, what: `the hook to be working on ${revision}` }).then((go) => go());
}

test.serial('the gate’s Triggers are Ready on the real Broker: one for the hook’s requests, one for the replies to the gate', async (t) => {
  const triggers = await waitFor(
    async () => {
      const res = await kubeRequest(env.admin, 'GET', `/apis/eventing.knative.dev/v1/namespaces/${env.namespace}/triggers`);
      const items = (res.body as { items: TriggerObject[] }).items;
      const ready = items.filter((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      return ready.length === 2 ? items : undefined;
    },
    { timeoutMs: 60_000, what: 'the request and reply Triggers to be Ready' },
  );
  const byRole = Object.fromEntries(triggers.map((x) => [x.metadata.labels?.['prestart.dev/trigger'], x]));
  t.is(byRole.requests?.spec.subscriber.uri, hook.url, 'requests go to the hook');
  t.regex(byRole.replies?.spec.subscriber.uri ?? '', /^http:\/\/127\.0\.0\.1:\d+\/events$/, 'replies go to the gate’s sink');
});

test.serial(
  'through the Broker: Knative’s Revision is held, the hook’s progress and reply come back via the Broker, and it is released',
  async (t) => {
    const deployments = await watchCollection<V1Deployment>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);
    t.teardown(() => deployments.stop());
    await kn.createService('bus', { annotations: { [BINDING]: 'bus-db' } });
    const rev = await revision('bus-00001', 'created by Knative', () => true);
    t.true(isHeld(rev), 'the gate stamped the hold label on the Revision Knative created');

    // The progress report travelled hook → Broker → reply Trigger → gate.
    const running = await env.waitForRun('bus-00001', 'showing the hook’s progress', (r) =>
      Boolean(r.status?.hooks.some((h) => h.progress === 50)),
    );
    t.is(running.status?.phase, 'Running');
    t.regex(running.status?.hooks[0]?.message ?? '', /bus-00001: creating the database/);
    await revision('bus-00001', 'ResourcesAvailable=Unknown/Deploying', (r) => condition(r, 'ResourcesAvailable')?.reason === 'Deploying');
    t.deepEqual(
      deployments.seen.filter((s) => s.object.metadata?.labels?.['serving.knative.dev/revision'] === 'bus-00001'),
      [],
      'no Deployment while held',
    );

    const replied = performance.now();
    await finishWork('bus-00001');
    const deployment = await firstSighting(
      deployments.seen,
      (d) => d.metadata?.labels?.['serving.knative.dev/revision'] === 'bus-00001',
      'Knative to create the Deployment of bus-00001 after the reply came through the Broker',
      30_000,
    );
    t.log(`Deployment created ${((deployment.at - replied) / 1000).toFixed(2)} s after the hook finished (reply via the Broker)`);
    const run = await env.waitForRun('bus-00001', 'Released', (r) => r.status?.phase === 'Released');
    t.regex(run.status?.hooks[0]?.message ?? '', /database for bus-00001 ready/);
    t.is(seen.get('bus-00001')?.requests, 1, 'the hook ran once');

    const pod = await readyPodOf(env.core, env.namespace, 'bus-00001');
    const app = pod.spec?.containers.find((c) => c.name === 'user-container');
    t.like(app?.env?.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef, { name: 'bus-db', key: 'url' });
    t.truthy(app?.volumeMounts?.find((m) => m.mountPath === '/bindings/db'));
    const ready = await revision('bus-00001', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
    t.false(isHeld(ready));
  },
);

test.serial('a Revision superseded while held is cancelled, and the hook is told through the Broker', async (t) => {
  await kn.updateService('bus', { annotations: { [BINDING]: 'bus-db' }, env: { GREETING: 'v2' } });
  await waitFor(() => finish.get('bus-00002'), { timeoutMs: 30_000, what: 'the hook to be working on bus-00002' });
  // A second update before the hook finished: Knative creates bus-00003, and bus-00002, which
  // no traffic names, will never serve.
  await kn.updateService('bus', { annotations: { [BINDING]: 'bus-db' }, env: { GREETING: 'v3' } });
  const cancelled = await env.waitForRun('bus-00002', 'Cancelled', (r) => r.status?.phase === 'Cancelled');
  t.regex(cancelled.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /bus-00003/);
  const told = await waitFor(() => seen.get('bus-00002')?.cancelled, {
    timeoutMs: 30_000,
    what: 'the hook’s work on bus-00002 to be cancelled',
  });
  t.is(told, 'superseded by bus-00003');
  t.true(isHeld(await kn.revision('bus-00002')), 'the cancelled Revision stays held: it never gets a Deployment');

  await finishWork('bus-00003');
  await revision('bus-00003', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
  const svc = await waitFor(
    async () => {
      const s = await kn.service('bus');
      return s?.status?.latestReadyRevisionName === 'bus-00003' ? s : undefined;
    },
    { timeoutMs: 30_000, what: 'Service bus to report bus-00003 as its latest ready Revision' },
  );
  t.is(svc.status?.latestCreatedRevisionName, 'bus-00003');
  t.is(seen.get('bus-00002')?.requests, 1, 'the cancelled request was not run again');
});
