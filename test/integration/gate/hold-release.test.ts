// The gate's main promise, on the real control plane: a matching Revision is held before its
// Deployment exists, its hook runs, the reply releases it, and its pods get the binding.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, type V1Pod } from '@kubernetes/client-node';
import test from 'ava';

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('hold');
});

test.after.always(async () => {
  await env?.stop();
});

test('a matching Revision is held, its Deployment denied with directions, and released with its binding on every pod', async (t) => {
  const hookName = `${env.instance}-db`;
  await env.core.createNamespacedSecret({
    namespace: env.namespace,
    body: { metadata: { name: 'demo-db' }, stringData: { url: 'postgres://demo', password: 's3cret' } },
  });
  const pending: ReceivedRequest[] = [];
  const hook = await startHookServer(async (req) => {
    pending.push(req);
    return { status: 202 };
  });
  t.teardown(() => hook.close());
  await env.createHook(hookName, {
    match: env.annotationMatch('serving-binding', 'demo-db'),
    contributions: { allowed: ['env', 'volume'] },
    params: { plan: 'small' },
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { 'serving-binding': 'demo-db' });

  const created = await env.createRevision('demo-00001', { annotations: { 'serving-binding': 'demo-db' } });
  t.true(isHeld(created), 'the webhook stamps the hold label at create');
  t.deepEqual(JSON.parse(created.metadata?.annotations?.['prestart.dev/hooks'] ?? '[]'), [hookName]);

  const denied = await env.createDeploymentLikeKnative(created);
  t.false(denied.created);
  if (!denied.created) {
    t.is(denied.status, 403);
    t.regex(denied.message, /demo-00001 is held/);
    t.regex(denied.message, new RegExp(`kubectl get prestartrun demo-00001 -n ${env.namespace}`));
  }

  const request = await waitFor(() => pending[0], { timeoutMs: 30_000, what: 'the hook to receive its request' });
  t.is(request.headers['ce-type'], 'revision.prestart.requested');
  t.is(request.headers['ce-prestarthook'], hookName);
  t.is(request.data.revision.name, 'demo-00001');
  t.deepEqual((request.data as unknown as { hook: { params: unknown } }).hook.params, { plan: 'small' });
  const running = await env.waitForRun('demo-00001', 'hook Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
  t.is(running.status?.phase, 'Running');
  t.true(isHeld(await env.getRevision('demo-00001')), 'still held while the hook works');

  const answer = await asyncReply(request, 'succeeded', {
    message: 'database demo-db ready',
    contributions: [
      { name: 'db-env', secretName: 'demo-db', as: 'env', env: { DATABASE_URL: 'url' } },
      { name: 'db', secretName: 'demo-db', as: 'volume' },
    ],
  });
  t.is(answer.status, 202);

  const released = await env.waitReleased('demo-00001');
  t.is(released.metadata?.labels?.['prestart.dev/inject'], 'true');
  t.false((released.metadata?.finalizers ?? []).includes('prestart.dev/cancel-hooks'));
  const run = await env.waitForRun('demo-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.summary, '1/1');

  const allowed = await env.createDeploymentLikeKnative(released);
  t.deepEqual(allowed, { created: true });

  const pod: V1Pod = await waitFor(
    async () => {
      const pods = await env.core.listNamespacedPod({ namespace: env.namespace, labelSelector: 'serving.knative.dev/revision=demo-00001' });
      return pods.items.find((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    },
    { timeoutMs: 60_000, what: 'a Ready pod of demo-00001 on the kwok node' },
  );
  const app = pod.spec?.containers.find((c) => c.name === 'user-container');
  t.like(app?.env?.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef, { name: 'demo-db', key: 'url' });
  t.is(app?.env?.find((e) => e.name === 'SERVICE_BINDING_ROOT')?.value, '/bindings');
  t.truthy(app?.volumeMounts?.find((m) => m.mountPath === '/bindings/db' && m.readOnly));
  t.truthy(pod.spec?.volumes?.find((v) => v.secret?.secretName === 'demo-db'));
  const queue = pod.spec?.containers.find((c) => c.name === 'queue-proxy');
  t.falsy(
    queue?.env?.find((e) => e.name === 'DATABASE_URL'),
    'queue-proxy gets no binding',
  );
});

test('a Revision that matches no hook is never held', async (t) => {
  const rev = await env.createRevision('plain-00001', { annotations: { 'serving-binding': 'other' } });
  t.false(isHeld(rev));
  t.is(rev.metadata?.annotations?.['prestart.dev/hooks'], undefined);
  t.deepEqual(await env.createDeploymentLikeKnative(rev), { created: true });
  const run = await env.custom
    .getNamespacedCustomObject({
      group: 'prestart.dev',
      version: 'v1alpha1',
      plural: 'prestartruns',
      namespace: env.namespace,
      name: 'plain-00001',
    })
    .catch((err: unknown) => err);
  t.true(run instanceof ApiException && run.code === 404, 'no PrestartRun for an unheld Revision');
});
