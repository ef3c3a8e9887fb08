// A tenant cannot bypass the hold: they cannot remove the label or rewrite the snapshot, and
// what they write on their own Revision cannot skip, forge or add hooks.
import {
  ApiException,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import test from 'ava';
import { HOLD_LABEL } from '../../../api/types.ts';
import { type GateEnv, gateEnv } from '../../../devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '../../../devcluster/gate/hook-server.ts';
import { isHeld } from '../../../devcluster/gate/revisions.ts';
import { waitFor } from '../../../devcluster/wait.ts';

let env: GateEnv;
let tenant: KubeConfig;
let hookName: string;
let hookServer: HookServer;

test.before(async () => {
  env = await gateEnv('tenant');
  const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  // A namespace owner: every verb on Knative's and the project's resources in their namespace.
  await rbac.createNamespacedRole({
    namespace: env.namespace,
    body: {
      metadata: { name: 'owner' },
      rules: [
        { apiGroups: ['serving.knative.dev'], resources: ['*'], verbs: ['*'] },
        { apiGroups: ['prestart.dev'], resources: ['*'], verbs: ['*'] },
        { apiGroups: ['apps'], resources: ['deployments'], verbs: ['*'] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: 'owner' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'owner' },
      subjects: [{ kind: 'User', name: 'tenant-alice', apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  tenant = new KubeConfig();
  tenant.loadFromFile(await env.cluster.mintUserKubeconfig('tenant-alice', ['system:authenticated']));
  hookServer = await startHookServer(async () => ({ status: 202 }));
  hookName = `${env.instance}-scan`;
  await env.createHook(hookName, {
    match: env.annotationMatch('scan'),
    delivery: { transport: 'http', url: hookServer.url },
  });
  await env.waitUntilStamped(hookName, { scan: 'yes' });
});

test.after.always(async () => {
  await hookServer?.close();
  await env?.stop();
});

async function tenantPatch(name: string, patch: object): Promise<unknown> {
  return tenant
    .makeApiClient(CustomObjectsApi)
    .patchNamespacedCustomObject(
      { group: 'serving.knative.dev', version: 'v1', plural: 'revisions', namespace: env.namespace, name, body: patch },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )
    .then(
      () => undefined,
      (e: unknown) => e,
    );
}

test('a namespace owner cannot remove the hold label or rewrite the hooks snapshot', async (t) => {
  const rev = await env.createRevision('held-00001', { annotations: { scan: 'yes' }, kc: tenant });
  t.true(isHeld(rev));
  const removal = await tenantPatch('held-00001', { metadata: { labels: { [HOLD_LABEL]: null } } });
  t.true(removal instanceof ApiException && removal.code === 403, 'removing the label is denied');
  if (removal instanceof ApiException) t.regex(String(removal.body), /prestart/);
  const rewrite = await tenantPatch('held-00001', { metadata: { annotations: { 'prestart.dev/hooks': '[]' } } });
  t.true(rewrite instanceof ApiException && rewrite.code === 403, 'rewriting the snapshot is denied');
  const finalizer = await tenantPatch('held-00001', { metadata: { finalizers: null } });
  t.true(finalizer instanceof ApiException && finalizer.code === 403, 'dropping the cancel finalizer is denied');
  const other = await tenantPatch('held-00001', { metadata: { labels: { team: 'a' } } });
  t.is(other, undefined, 'other label changes are still allowed');
});

test('a forged stamp on the tenant’s own Revision neither skips nor forges hooks', async (t) => {
  const skip = await env.createRevision('skip-00001', {
    annotations: { scan: 'yes', 'prestart.dev/hooks': '[]' },
    labels: { [HOLD_LABEL]: 'false' },
    kc: tenant,
  });
  t.true(isHeld(skip), 'the hold is set anyway');
  t.deepEqual(JSON.parse(skip.metadata?.annotations?.['prestart.dev/hooks'] ?? ''), [hookName], 'the real hooks, not the forged list');

  const forged = await env.createRevision('forge-00001', {
    annotations: { 'prestart.dev/hooks': '["imaginary"]', 'prestart.dev/reason': 'fake' },
    labels: { [HOLD_LABEL]: 'true', 'prestart.dev/inject': 'true' },
    kc: tenant,
  });
  t.false(isHeld(forged), 'no hook applies, so the forged hold is stripped');
  t.is(forged.metadata?.annotations?.['prestart.dev/hooks'], undefined);
  t.is(forged.metadata?.labels?.['prestart.dev/inject'], undefined);
});

test('a namespace owner cannot write a PrestartRun’s status', async (t) => {
  await env.createRevision('run-00001', { annotations: { scan: 'yes' } });
  const api = tenant.makeApiClient(CustomObjectsApi);
  const run = await waitFor(
    () =>
      api
        .getNamespacedCustomObject({
          group: 'prestart.dev',
          version: 'v1alpha1',
          plural: 'prestartruns',
          namespace: env.namespace,
          name: 'run-00001',
        })
        .catch(() => undefined),
    { timeoutMs: 30_000, what: 'the PrestartRun' },
  );
  t.truthy(run);
  const err = await api
    .patchNamespacedCustomObjectStatus(
      {
        group: 'prestart.dev',
        version: 'v1alpha1',
        plural: 'prestartruns',
        namespace: env.namespace,
        name: 'run-00001',
        body: { status: { phase: 'Released' } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  if (err instanceof ApiException && err.code !== 403) t.log(err.code, String(err.body));
  t.true(err instanceof ApiException && err.code === 403);
});
