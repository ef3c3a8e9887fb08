// End to end with Knative Serving's own controllers (devcluster/knative-serving.ts): a
// Knative Service whose template matches a hook gets a Revision from Knative itself; the gate
// holds it before Knative's Deployment exists, Knative reports it as deploying (not failed) with
// the hold policy's message, and the reply of the example binding hook
// (examples/typescript-binding-hook: provisions, creates its Secret, answers) releases it at
// once, not at Knative's next retry. Real here: Knative's reconcilers, its webhook, the HPA autoscaler class, Kubernetes'
// controllers, the gate. Stand-in: the networking layer (startIngressStandIn), only where a test
// reads Route/Service readiness or traffic; see docs/testing.md.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import {
  type CoreEvent,
  condition,
  conditionsLine,
  firstSighting,
  Knative,
  type KnativeObject,
  readyPodOf,
  retryTimes,
  type Sighting,
  startIngressStandIn,
  waitForRevision,
  watchCollection,
} from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import type { V1Deployment } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import { provisionDatabase } from '../../examples/typescript-binding-hook/index.ts';
import { kubernetesSecrets } from '../../examples/typescript-binding-hook/secrets.ts';
import { type HookRequest, type HookServer, serveHook } from '../../hooks/index.ts';

let env: GateEnv;
let serving: KnativeServing;
let kn: Knative;
let ingressStandIn: { stop(): void };
const cleanups: (() => void | Promise<void>)[] = [];

/** Requests the database hook received, by Revision. */
const dbRequests = new Map<string, HookRequest>();
/** Per Revision: starts the example hook's work (the test decides when, to hold the Revision long enough). */
const startWork = new Map<string, () => void>();
/** Per Revision: when the example hook finished its work and handed the reply to the SDK. */
const repliedAt = new Map<string, number>();
const BINDING = 'serving-binding';
/** How long the example hook's (fake) provisioning takes once started. */
const PROVISION_MS = 2000;

test.before(async () => {
  env = await gateEnv('e2e');
  serving = await startKnativeServing(env.cluster, {
    progress: (line) =>
      process.stderr.write(`e2e: ${line}
`),
  });
  kn = new Knative(env.admin, env.namespace);
  ingressStandIn = startIngressStandIn(env.admin, env.namespace);

  // The database hook is examples/typescript-binding-hook: it provisions (2 s), stores the
  // credentials in a Secret, and replies (async, to the gate's sink). The test only decides when
  // each Revision's work starts, so it can hold a Revision until Knative's backoff has grown.
  const example = provisionDatabase(PROVISION_MS, kubernetesSecrets(env.admin));
  const db: HookServer = await serveHook({
    name: `${env.instance}-db`,
    host: '127.0.0.1',
    port: 0,
    sink: '',
    logger: pino({ name: 'db-hook', level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
    handler: async (req, ctx) => {
      dbRequests.set(req.revision.name, req);
      await new Promise<void>((resolve, reject) => {
        startWork.set(req.revision.name, resolve);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      });
      const outcome = await example(req, ctx);
      repliedAt.set(req.revision.name, performance.now());
      return outcome;
    },
  });
  cleanups.push(() => db.close());
  const name = `${env.instance}-db`;
  await env.createHook(name, {
    match: env.annotationMatch(BINDING, 'demo-db'),
    params: { secretName: 'demo-db' },
    contributions: { allowed: ['env', 'volume'] },
    timeout: '5m',
    delivery: { transport: 'http', url: db.url },
  });
  await env.waitUntilStamped(name, { [BINDING]: 'demo-db' });
});

test.after.always(async () => {
  ingressStandIn?.stop();
  for (const c of cleanups) await c();
  await env?.stop();
  await serving?.stop();
});

function requestFor(revision: string): Promise<HookRequest> {
  return waitFor(() => dbRequests.get(revision), {
    timeoutMs: 30_000,
    what: `the database hook to receive the request for Revision ${revision}`,
  });
}

/** Lets the example hook do its work for `revision`; resolves when it has replied. */
async function provision(revision: string): Promise<number> {
  const go = await waitFor(() => startWork.get(revision), { timeoutMs: 30_000, what: `the hook to be waiting on ${revision}` });
  go();
  return waitFor(() => repliedAt.get(revision), { timeoutMs: 30_000, what: `the example hook to reply for ${revision}` });
}

function deploymentsOf(sightings: Sighting<V1Deployment>[], revision: string): Sighting<V1Deployment>[] {
  return sightings.filter((s) => s.object.metadata?.labels?.['serving.knative.dev/revision'] === revision);
}

/** Knative's Revision, waited for with its log named on a timeout. */
const revision = (name: string, what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 30_000) =>
  waitForRevision(kn, name, what, ok, { timeoutMs, logs: serving.controllerLog });

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

test.serial(
  'Knative creates the Revision, the gate holds it before its Deployment, and the reply releases it at once, not at Knative’s next retry',
  async (t) => {
    const deployments = await watchCollection<V1Deployment>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);
    const events = await watchCollection<CoreEvent>(env.admin, `/api/v1/namespaces/${env.namespace}/events`, {
      fieldSelector: 'involvedObject.name=demo-00001',
    });
    t.teardown(() => {
      deployments.stop();
      events.stop();
    });

    const created = performance.now();
    await kn.createService('demo', { annotations: { [BINDING]: 'demo-db' } });
    const rev = await revision('demo-00001', 'created by Knative', () => true);
    t.true(isHeld(rev), 'the gate stamped the hold label on the Revision Knative created');
    t.is(rev.metadata?.labels?.['serving.knative.dev/service'], 'demo', 'the Revision is Knative’s, of Service demo');
    const request = await requestFor('demo-00001');
    t.is(request.event.type, 'revision.prestart.requested');
    t.is(request.params.secretName, 'demo-db');

    // Knative tried to create the Deployment and the hold policy refused: deploying, not failed.
    const deploying = await revision(
      'demo-00001',
      'ResourcesAvailable=Unknown/Deploying',
      (r) => condition(r, 'ResourcesAvailable')?.reason === 'Deploying',
    );
    t.is(condition(deploying, 'ResourcesAvailable')?.status, 'Unknown');
    t.is(condition(deploying, 'Ready')?.status, 'Unknown', `Ready is Unknown, not False (${conditionsLine(deploying)})`);
    t.is(condition(deploying, 'Ready')?.reason, 'Deploying');
    const warning = await firstSighting(
      events.seen,
      (e) => e.reason === 'InternalError',
      'Knative’s InternalError event on demo-00001',
      30_000,
    );
    t.is(warning.object.type, 'Warning');
    t.is(warning.object.source?.component, 'revision-controller');
    t.regex(warning.object.message ?? '', /failed to create deployment "demo-00001-deployment"/);
    t.regex(
      warning.object.message ?? '',
      new RegExp(
        `knative-prestart: Revision demo-00001 is held until its pre-start hooks finish; see: kubectl get prestartrun demo-00001 -n ${env.namespace}`,
      ),
    );

    // Hold until Knative's backoff has grown past a minute: after a gap of 40 s, its next retry
    // is about 80 s away (its per-item backoff doubles).
    await waitFor(
      () => {
        const tries = retryTimes(events.seen);
        return tries.some((r, i) => i > 0 && r.at - (tries[i - 1]?.at ?? r.at) >= 40_000);
      },
      { timeoutMs: 150_000, what: 'Knative’s retry backoff to reach 40 s (from its InternalError event count)' },
    );
    const tries = retryTimes(events.seen);
    const gaps = tries.map((r, i) => (i === 0 ? 0 : r.at - (tries[i - 1] as { at: number }).at));
    t.log(`Knative's attempts to create the Deployment (InternalError count, time after the Service was created, gap):`);
    for (const [i, r] of tries.entries())
      t.log(`  #${r.count} at +${seconds(r.at - created)}${i > 0 ? ` (gap ${seconds(gaps[i] ?? 0)})` : ''}`);
    const last = tries.at(-1) as { count: number; at: number };
    const lastGap = gaps.at(-1) ?? 0;
    // Knative's per-item backoff doubles: the next attempt comes about one more doubled gap later.
    const nextRetry = last.at + 2 * lastGap;
    t.deepEqual(deploymentsOf(deployments.seen, 'demo-00001'), [], 'no Deployment while held');
    const held = await kn.revision('demo-00001');
    t.true(isHeld(held));
    t.is(condition(held, 'Ready')?.status, 'Unknown', 'still deploying, not failed, after the hold');

    t.is(
      await env.core.readNamespacedSecret({ namespace: env.namespace, name: 'demo-db' }).then(
        () => 'exists',
        () => 'absent',
      ),
      'absent',
      'no Secret before the hook provisions the database',
    );
    const replied = await provision('demo-00001');
    const deployment = await firstSighting(
      deployments.seen,
      (d) => d.metadata?.labels?.['serving.knative.dev/revision'] === 'demo-00001',
      'Knative to create the Deployment of demo-00001 after the reply',
      30_000,
    );
    const afterReply = deployment.at - replied;
    t.log(
      `hook replied ${seconds(replied - created)} after the Service was created; Knative created the Deployment ${seconds(afterReply)} after the reply`,
    );
    t.log(`Knative's next retry was due about ${seconds(nextRetry - replied)} after the reply (last gap ${seconds(lastGap)})`);
    t.true(afterReply < 5_000, `the Deployment appears within 5 s of the reply (took ${seconds(afterReply)})`);
    t.true(nextRetry - replied > 60_000, 'Knative’s own next retry was more than a minute away');
    t.true(deployment.at < nextRetry - 30_000, 'the Deployment appears long before Knative’s next backoff retry');
    const secret = await env.core.readNamespacedSecret({ namespace: env.namespace, name: 'demo-db' });
    t.is(secret.metadata?.labels?.['app.kubernetes.io/managed-by'], 'provision-db-example', 'the example hook created the Secret');

    // The pods carry the binding the hook contributed; Knative reports the Revision Ready.
    const pod = await readyPodOf(env.core, env.namespace, 'demo-00001');
    const app = pod.spec?.containers.find((c) => c.name === 'user-container');
    t.like(app?.env?.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef, { name: 'demo-db', key: 'uri' });
    t.like(app?.env?.find((e) => e.name === 'DATABASE_PASSWORD')?.valueFrom?.secretKeyRef, { name: 'demo-db', key: 'password' });
    t.truthy(
      app?.volumeMounts?.find((m) => m.mountPath === '/bindings/db' && m.readOnly),
      'the binding is mounted at /bindings/db',
    );
    t.truthy(pod.spec?.volumes?.find((v) => v.secret?.secretName === 'demo-db'));
    t.falsy(
      pod.spec?.containers.find((c) => c.name === 'queue-proxy')?.env?.some((e) => e.name === 'DATABASE_URL'),
      'queue-proxy gets no binding',
    );
    const ready = await revision('demo-00001', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
    t.false(isHeld(ready));
    t.log(`Revision demo-00001 Ready ${seconds(performance.now() - replied)} after the reply`);

    // With the networking stand-in marking Ingresses Ready, the Service is Ready and routes to it.
    const svc = await waitFor(
      async () => {
        const s = await kn.service('demo');
        return condition(s, 'Ready')?.status === 'True' ? s : undefined;
      },
      { timeoutMs: 60_000, what: 'Service demo Ready (Ingress stand-in)' },
    );
    t.deepEqual(
      svc.status?.traffic?.map((x) => [x.revisionName, x.percent]),
      [['demo-00001', 100]],
    );
  },
);

test.serial('a Service update: traffic stays on the old Revision while the new one is held, and moves when it is released', async (t) => {
  const deployments = await watchCollection<V1Deployment>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);
  t.teardown(() => deployments.stop());
  await kn.updateService('demo', { annotations: { [BINDING]: 'demo-db' }, env: { GREETING: 'v2' } });
  const rev = await revision('demo-00002', 'created by Knative', () => true);
  t.true(isHeld(rev));
  await requestFor('demo-00002');
  await revision('demo-00002', 'ResourcesAvailable=Unknown/Deploying', (r) => condition(r, 'ResourcesAvailable')?.reason === 'Deploying');

  const whileHeld = await waitFor(
    async () => {
      const s = await kn.service('demo');
      return s?.status?.latestCreatedRevisionName === 'demo-00002' && s.status.observedGeneration === s.metadata?.generation
        ? s
        : undefined;
    },
    { what: 'Service demo to observe its new Revision demo-00002' },
  );
  t.is(whileHeld.status?.latestReadyRevisionName, 'demo-00001');
  t.deepEqual(
    whileHeld.status?.traffic?.map((x) => [x.revisionName, x.percent]),
    [['demo-00001', 100]],
    'traffic stays on the old Revision',
  );
  t.not(
    condition(whileHeld, 'Ready')?.status,
    'False',
    `the Service is not failed while the new Revision is held (${conditionsLine(whileHeld)})`,
  );
  const route = await kn.route('demo');
  t.deepEqual(
    route?.status?.traffic?.map((x) => [x.revisionName, x.percent]),
    [['demo-00001', 100]],
  );
  t.deepEqual(deploymentsOf(deployments.seen, 'demo-00002'), [], 'no Deployment for the held Revision');

  await provision('demo-00002');
  await revision('demo-00002', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
  const moved = await waitFor(
    async () => {
      const s = await kn.service('demo');
      const traffic = s?.status?.traffic ?? [];
      return condition(s, 'Ready')?.status === 'True' && traffic.length === 1 && traffic[0]?.revisionName === 'demo-00002' ? s : undefined;
    },
    { timeoutMs: 60_000, what: 'Service demo Ready with all traffic on demo-00002 (Ingress stand-in)' },
  );
  t.is(moved.status?.traffic?.[0]?.percent, 100);
  t.is(moved.status?.latestReadyRevisionName, 'demo-00002');
});

test.serial(
  'a failing hook keeps the new Revision held with the reason where users look; traffic stays; an admin retry after the fix releases it',
  async (t) => {
    const name = `${env.instance}-quota`;
    // The quota hook refuses until its "capacity" is fixed, then accepts (synchronous replies).
    let capacity = false;
    const quota = await startHookServer(async (req) =>
      capacity
        ? syncReply(req, 'succeeded', { message: 'plan small has room again' })
        : syncReply(req, 'failed', { message: 'no capacity left for plan small' }),
    );
    cleanups.push(() => quota.close());
    await env.createHook(name, {
      match: env.annotationMatch(BINDING, 'big-db'),
      delivery: { transport: 'http', url: quota.url },
    });
    await env.waitUntilStamped(name, { [BINDING]: 'big-db' });

    // A Service serving from a first Revision no hook matches; its update asks for the quota hook.
    await kn.createService('big');
    await revision('big-00001', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
    const events = await watchCollection<CoreEvent>(env.admin, `/api/v1/namespaces/${env.namespace}/events`, {
      fieldSelector: 'involvedObject.name=big-00002',
    });
    t.teardown(() => events.stop());
    await kn.updateService('big', { annotations: { [BINDING]: 'big-db' } });

    const run = await env.waitForRun('big-00002', 'Failed', (r) => r.status?.phase === 'Failed');
    t.regex(run.status?.hooks?.[0]?.message ?? '', /no capacity left/);
    const denial = await firstSighting(
      events.seen,
      (e) => e.reason === 'InternalError' && /reason: .*no capacity left for plan small/.test(e.message ?? ''),
      'Knative’s InternalError event on big-00002 to carry the hook’s failure',
      30_000,
    );
    t.log(`Knative's event: ${denial.object.message}`);
    const retryHint = /kubectl annotate prestartrun big-00002 -n \S+ prestart\.dev\/retry=(\S+) --overwrite/.exec(
      denial.object.message ?? '',
    );
    t.truthy(retryHint, 'the event says how to retry');
    const rev = await kn.revision('big-00002');
    t.true(isHeld(rev), 'still held');
    t.is(condition(rev, 'ResourcesAvailable')?.status, 'Unknown', `Knative still reports it deploying (${conditionsLine(rev)})`);
    const deps = await env.apps.listNamespacedDeployment({
      namespace: env.namespace,
      labelSelector: 'serving.knative.dev/revision=big-00002',
    });
    t.is(deps.items.length, 0, 'no Deployment');
    const whileFailed = await waitFor(
      async () => {
        const s = await kn.service('big');
        return s?.status?.latestCreatedRevisionName === 'big-00002' && s.status.observedGeneration === s.metadata?.generation
          ? s
          : undefined;
      },
      { what: 'Service big to observe big-00002' },
    );
    t.deepEqual(
      whileFailed.status?.traffic?.map((x) => [x.revisionName, x.percent]),
      [['big-00001', 100]],
      'traffic stays on the old Revision',
    );

    // The admin fixes the hook's side, then runs the command the event printed.
    capacity = true;
    await env.annotateRun('big-00002', { 'prestart.dev/retry': retryHint?.[1] ?? '' });
    const released = await env.waitForRun('big-00002', 'Released after the retry', (r) => r.status?.phase === 'Released');
    t.is(released.status?.hooks?.[0]?.attempt, 2, 'the retry is a new attempt');
    await revision('big-00002', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
    const moved = await waitFor(
      async () => {
        const s = await kn.service('big');
        const traffic = s?.status?.traffic ?? [];
        return condition(s, 'Ready')?.status === 'True' && traffic.length === 1 && traffic[0]?.revisionName === 'big-00002' ? s : undefined;
      },
      { timeoutMs: 60_000, what: 'Service big Ready with all traffic on big-00002 (Ingress stand-in)' },
    );
    t.is(moved.status?.traffic?.[0]?.percent, 100);
  },
);
