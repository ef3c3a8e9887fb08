// A tenant cannot bypass the hold: they cannot remove the label or rewrite the snapshot, what
// they write on their own Revision cannot skip, forge or add hooks, and they cannot hand Knative
// a Deployment of their own to adopt as the held Revision's (test/e2e/adoption.test.ts shows
// the same against Knative Serving itself).

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  ApiException,
  AppsV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Deployment,
  type V1OwnerReference,
} from '@kubernetes/client-node';
import test from 'ava';
import { RUNS, type RunObject } from '../../../api/resources.ts';
import { HOLD_LABEL } from '../../../api/types.ts';
import { refusal } from '../../support/refusal.ts';

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
        { apiGroups: ['apps'], resources: ['deployments', 'deployments/scale'], verbs: ['*'] },
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
  // A policy takes effect a moment after it is created: probe with a dry run until it refuses.
  await waitFor(
    async () =>
      (
        await refusal(
          tenant.makeApiClient(AppsV1Api).createNamespacedDeployment({
            namespace: env.namespace,
            dryRun: 'All',
            body: tenantDeployment('probe', 'probe', { labels: { 'serving.knative.dev/deployment-hash': 'probe' } }),
          }),
        )
      )?.code === 403,
    { what: 'the policy prestart-revision-deployments to be in force' },
  );
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

test('a namespace owner cannot remove the hold label, rewrite the hooks snapshot, or change any other label of a held Revision', async (t) => {
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
  t.true(
    other instanceof ApiException && other.code === 403,
    'any other label too: the hooks are told the labels (prestart-revision-metadata)',
  );
  if (other instanceof ApiException) t.regex(String(other.body), /may not change the labels or annotations of Revision held-00001/);
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

/** What a tenant would write as `<revision>-deployment`; Knative's own labels, for a Revision it adopts. */
function tenantDeployment(
  name: string,
  uid: string,
  opts: { owner?: V1OwnerReference; labels?: Record<string, string>; podLabels?: Record<string, string> },
): V1Deployment {
  const labels = opts.podLabels ?? { 'serving.knative.dev/revision': name, 'serving.knative.dev/revisionUID': uid };
  return {
    metadata: {
      name: `${name}-deployment`,
      labels: { ...labels, ...opts.labels },
      ...(opts.owner ? { ownerReferences: [opts.owner] } : {}),
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'user-container', image: 'dev.local/not-what-the-hooks-saw:v1' }] } },
    },
  };
}

const revisionOwner = (name: string, uid: string, kind = 'Revision'): V1OwnerReference => ({
  apiVersion: kind === 'Revision' ? 'serving.knative.dev/v1' : 'v1',
  kind,
  name,
  uid,
  controller: true,
});

test('a namespace owner cannot pre-create the held Revision’s Deployment for Knative to adopt', async (t) => {
  const rev = await env.createRevision('adopt-00001', { annotations: { scan: 'yes' }, kc: tenant });
  t.true(isHeld(rev));
  const uid = rev.metadata?.uid ?? '';
  const apps = tenant.makeApiClient(AppsV1Api);
  const create = (body: V1Deployment) => refusal(apps.createNamespacedDeployment({ namespace: env.namespace, body }));
  // Knative Serving v0.50.0 adopts, untouched, a `<revision>-deployment` whose controller
  // ownerReference has the Revision's uid (the kind is not compared) and whose deployment-hash
  // label matches its own. The policy decides on the shape alone, whatever hash is written.
  const hash = { 'serving.knative.dev/deployment-hash': 'copied-from-knative' };
  const attempts: [string, V1Deployment][] = [
    [
      'controlled by the Revision, with the hash',
      tenantDeployment('adopt-00001', uid, { owner: revisionOwner('adopt-00001', uid), labels: hash }),
    ],
    ['controlled by the Revision, no hash', tenantDeployment('adopt-00001', uid, { owner: revisionOwner('adopt-00001', uid) })],
    [
      'the Revision’s uid under another kind, with the hash',
      tenantDeployment('adopt-00001', uid, { owner: revisionOwner('adopt-00001', uid, 'ConfigMap'), labels: hash }),
    ],
    ['no owner, with the hash', tenantDeployment('adopt-00001', uid, { labels: hash })],
  ];
  for (const [what, body] of attempts) {
    const refused = await create(body);
    t.is(refused?.code, 403, what);
    t.regex(refused?.message ?? '', /ValidatingAdmissionPolicy 'prestart-revision-deployments'/, what);
    t.regex(
      refused?.message ?? '',
      /tenant-alice may not create Deployment adopt-00001-deployment for (Revision adopt-00001|a Revision): only Knative Serving makes a Revision's Deployment/,
      what,
    );
  }

  // A Deployment of their own, neither controlled nor hashed, whose pods do not carry the
  // Revision's labels, is theirs to make; making it the Revision's afterwards is refused like
  // creating it so (test/integration/security/knative-writes.test.ts tries every other shape).
  t.is(await create(tenantDeployment('adopt-00001', uid, { podLabels: { app: 'mine' } })), undefined, 'a plain Deployment is allowed');
  const adopt = await refusal(
    apps.patchNamespacedDeployment(
      {
        name: 'adopt-00001-deployment',
        namespace: env.namespace,
        body: { metadata: { ownerReferences: [revisionOwner('adopt-00001', uid)] } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ),
  );
  t.is(adopt?.code, 403);
  t.regex(adopt?.message ?? '', /tenant-alice may not change Deployment adopt-00001-deployment of Revision adopt-00001/);
  t.true(isHeld(await env.getRevision('adopt-00001')), 'the Revision is still held');
});

test('a namespace owner cannot change what a released Revision’s Deployment runs, but may restart and scale it', async (t) => {
  // The Deployment Knative made for a released Revision (made here as the admin, standing in for Knative).
  const admin = env.admin.makeApiClient(AppsV1Api);
  const rev = await env.createRevision('live-00001', {});
  t.false(isHeld(rev));
  const uid = rev.metadata?.uid ?? '';
  await admin.createNamespacedDeployment({
    namespace: env.namespace,
    body: tenantDeployment('live-00001', uid, {
      owner: revisionOwner('live-00001', uid),
      labels: { 'serving.knative.dev/deployment-hash': 'abc' },
    }),
  });
  const apps = tenant.makeApiClient(AppsV1Api);
  const patch = (body: object) =>
    refusal(
      apps.patchNamespacedDeployment(
        { name: 'live-00001-deployment', namespace: env.namespace, body },
        setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
      ),
    );
  const swap = await patch({ spec: { template: { spec: { containers: [{ name: 'user-container', image: 'dev.local/unscanned:v2' }] } } } });
  t.is(swap?.code, 403, 'a new image would run without the hooks that saw the Revision’s');
  t.regex(swap?.message ?? '', /tenant-alice may not change Deployment live-00001-deployment of Revision live-00001/);
  const restart = await patch({
    spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } } },
  });
  t.is(restart, undefined, 'kubectl rollout restart still works');
  const scale = await refusal(
    apps.patchNamespacedDeploymentScale(
      { name: 'live-00001-deployment', namespace: env.namespace, body: { spec: { replicas: 2 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ),
  );
  t.is(scale, undefined, 'scaling is not the policy’s business');
});

test('a namespace owner cannot cut a PrestartRun loose from its Revision; the garbage collector still can', async (t) => {
  await env.createRevision('owned-00001', { annotations: { scan: 'yes' } });
  const run = await env.waitForRun('owned-00001', 'created', () => true);
  const api = tenant.makeApiClient(CustomObjectsApi);
  const patch = (body: object) =>
    refusal(
      api.patchNamespacedCustomObject(
        { group: 'prestart.dev', version: 'v1alpha1', plural: 'prestartruns', namespace: env.namespace, name: 'owned-00001', body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
  for (const [what, body] of [
    ['removing its ownerReference', { metadata: { ownerReferences: null } }],
    ['adding a finalizer', { metadata: { finalizers: ['tenant.example/keep'] } }],
  ] as const) {
    const refused = await patch(body);
    t.is(refused?.code, 403, what);
    t.regex(
      refused?.message ?? '',
      /tenant-alice may not change the ownerReferences or finalizers of PrestartRun owned-00001: the garbage collector deletes it with its Revision/,
      what,
    );
  }
  t.deepEqual((await env.getRun('owned-00001'))?.metadata?.ownerReferences, run.metadata?.ownerReferences, 'still owned by its Revision');

  // The garbage collector, as itself (its bootstrap role may update everything, everywhere), orphans
  // the run the way it does when the Revision is deleted with propagationPolicy Orphan.
  const gc = new KubeConfig();
  gc.loadFromFile(
    await env.cluster.mintUserKubeconfig('system:serviceaccount:kube-system:generic-garbage-collector', [
      'system:serviceaccounts',
      'system:serviceaccounts:kube-system',
    ]),
  );
  const orphaned = await gc
    .makeApiClient(CustomObjectsApi)
    .patchNamespacedCustomObject(
      { ...RUNS, namespace: env.namespace, name: 'owned-00001', body: { metadata: { ownerReferences: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  t.is((orphaned as RunObject).metadata?.ownerReferences, undefined, 'the garbage collector may orphan it');
});
