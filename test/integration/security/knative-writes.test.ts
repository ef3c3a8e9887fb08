// Issue 20, items 1 to 3, in the apiserver alone (no Knative, no gate: the policies decide on the
// request, so every way of writing is tried in seconds; test/e2e/adoption.test.ts performs the
// same attacks against Knative Serving's own controllers). A namespace editor (`edit` with
// Knative's aggregated editor rules, ./_knative-editor.ts) tries, by create, server-side apply,
// dry run, JSON, merge and strategic merge patches and replace:
// - R1: the hold label with another value than "true" (Knative's mergeMetadata would keep it),
//   and a `<revision>-deployment` controlled by the Revision's uid under a foreign apiVersion or
//   another kind (Knative compares the uid only), or whose pods carry the Revision's labels;
// - R3: on the Deployment Knative made for a released Revision, removing its controller
//   ownerReference and hash label and changing its image in one update, or in two;
// - R2: writing the status of Knative Serving's objects (a Revision's containerStatuses digest,
//   which Knative runs).
// Knative's identity (config/300-rbac.yaml binds it the verb the policies ask for) and the gate's
// do the writes their jobs need, and what stays open for tenants (restart, scale, orphaning
// without touching the pods, Deployments of their own) stays open.
import { randomBytes } from 'node:crypto';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { GATE_GROUPS, GATE_USER, installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { KNATIVE_CONTROLLER_USER, KNATIVE_NAMESPACE } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Deployment,
  type V1OwnerReference,
} from '@kubernetes/client-node';
import test from 'ava';
import { refusal } from '../../support/refusal.ts';
import { bindKnativeEditor } from './_knative-editor.ts';

const suffix = randomBytes(3).toString('hex');
const ns = `knative-writes-${suffix}`;
const TENANT = 'kw-editor';
const knativeRole = `knative-writes-knative-${suffix}`;
const editorRole = `knative-writes-editor-${suffix}`;
const HOLD = 'prestart.dev/hold';
const HASH = 'serving.knative.dev/deployment-hash';
const SERVING = { group: 'serving.knative.dev', version: 'v1', namespace: ns };
const DIGEST = (c: string) => `dev.local/demo/app@sha256:${c.repeat(64)}`;

let cluster: Cluster;
let admin: KubeConfig;
let tenant: KubeConfig;
let knative: KubeConfig;
let gate: KubeConfig;
let dropEditorRole: () => Promise<void> = async () => {};

async function kubeconfigOf(user: string, groups: string[]): Promise<KubeConfig> {
  const kc = new KubeConfig();
  kc.loadFromFile(await cluster.mintUserKubeconfig(user, groups));
  return kc;
}

const patchAs = (strategy: string) => setHeaderOptions('Content-Type', strategy);

interface Shape {
  owner?: V1OwnerReference;
  labels?: Record<string, string>;
  podLabels?: Record<string, string>;
  image?: string;
}

/** A Deployment of one container; its selector is its pods' labels. */
function deployment(name: string, shape: Shape = {}): V1Deployment {
  const podLabels = shape.podLabels ?? { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels: shape.labels ?? {}, ...(shape.owner ? { ownerReferences: [shape.owner] } : {}) },
    spec: {
      replicas: 1,
      selector: { matchLabels: podLabels },
      template: {
        metadata: { labels: podLabels },
        spec: { containers: [{ name: 'user-container', image: shape.image ?? 'dev.local/not-what-the-hooks-saw:v1' }] },
      },
    },
  };
}

/** Creates `body` as `kc` three ways (create, server-side apply, dry run): each one's refusal. */
async function createThreeWays(kc: KubeConfig, body: V1Deployment) {
  const apps = kc.makeApiClient(AppsV1Api);
  const name = body.metadata?.name ?? '';
  return {
    create: await refusal(apps.createNamespacedDeployment({ namespace: ns, body })),
    apply: await refusal(
      apps.patchNamespacedDeployment(
        { name, namespace: ns, body, fieldManager: 'tenant', force: true },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
    dryRun: await refusal(apps.createNamespacedDeployment({ namespace: ns, body, dryRun: 'All' })),
  };
}

async function createRevision(name: string): Promise<{ name: string; uid: string }> {
  const rev = (await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...SERVING,
    plural: 'revisions',
    body: {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Revision',
      metadata: { name, labels: { 'serving.knative.dev/configuration': name.replace(/-\d+$/, '') } },
      spec: { containers: [{ name: 'user-container', image: 'dev.local/demo/app:v1' }] },
    },
  })) as { metadata: { uid: string } };
  return { name, uid: rev.metadata.uid };
}

const tenantStatusPatch = (plural: string, name: string, body: object, version = 'v1') =>
  refusal(
    tenant
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObjectStatus({ ...SERVING, version, plural, name, body }, patchAs(PatchStrategy.MergePatch)),
  );

test.before(async () => {
  cluster = await installedCluster();
  admin = cluster.kubeConfig;
  await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
  dropEditorRole = await bindKnativeEditor(admin, ns, TENANT, editorRole);
  // Knative's controller: config/300-rbac.yaml binds it the policies' verb; Knative's own
  // ClusterRoles (not installed here) give it these API rights, which this stands in for.
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: knativeRole },
      rules: [
        { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'create', 'update', 'patch'] },
        { apiGroups: ['serving.knative.dev'], resources: ['revisions/status', 'configurations/status'], verbs: ['get', 'update', 'patch'] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: knativeRole },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: knativeRole },
      subjects: [{ kind: 'ServiceAccount', name: 'controller', namespace: KNATIVE_NAMESPACE }],
    },
  });
  [tenant, knative, gate] = await Promise.all([
    kubeconfigOf(TENANT, ['system:authenticated']),
    kubeconfigOf(KNATIVE_CONTROLLER_USER, [
      'system:serviceaccounts',
      `system:serviceaccounts:${KNATIVE_NAMESPACE}`,
      'system:authenticated',
    ]),
    kubeconfigOf(GATE_USER, GATE_GROUPS),
  ]);
  // The policies take effect a moment after they are created or changed: probe each new rule.
  await createRevision('probe-00001');
  await waitFor(
    async () => {
      const [hold, shaped, status] = await Promise.all([
        refusal(
          tenant
            .makeApiClient(AppsV1Api)
            .createNamespacedDeployment({ namespace: ns, dryRun: 'All', body: deployment('probe', { labels: { [HOLD]: 'false' } }) }),
        ),
        refusal(
          tenant.makeApiClient(AppsV1Api).createNamespacedDeployment({
            namespace: ns,
            dryRun: 'All',
            body: deployment('probe', { podLabels: { 'serving.knative.dev/revisionUID': 'probe' } }),
          }),
        ),
        tenantStatusPatch('revisions', 'probe-00001', { status: { observedGeneration: 1 } }),
      ]);
      return hold?.code === 403 && shaped?.code === 403 && status?.code === 403;
    },
    { what: 'the policies prestart-hold-deployments, prestart-revision-deployments and prestart-knative-status to be in force as changed' },
  );
});

test.after.always(async () => {
  if (!admin) return;
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.deleteClusterRoleBinding({ name: knativeRole }).catch(() => undefined);
  await rbac.deleteClusterRole({ name: knativeRole }).catch(() => undefined);
  await dropEditorRole();
  await admin
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: ns })
    .catch(() => undefined);
});

test('R1: the hold label is refused on a Deployment with any value, whichever way it is written', async (t) => {
  const holdRefused = (what: string, refused: { code: number; message: string } | undefined, verb: string, name: string, value: string) => {
    t.is(refused?.code, 403, what);
    t.regex(refused?.message ?? '', /ValidatingAdmissionPolicy 'prestart-hold-deployments'/, what);
    t.true(
      (refused?.message ?? '').includes(
        `${TENANT} may not ${verb} Deployment ${name} with the label ${HOLD}="${value}": that label, whatever its value, is how knative-prestart holds a Revision`,
      ),
      `${what}: ${refused?.message}`,
    );
  };
  for (const value of ['false', '', 'TRUE', 'true']) {
    const ways = await createThreeWays(tenant, deployment('hold-web', { labels: { [HOLD]: value } }));
    for (const [way, refused] of Object.entries(ways)) holdRefused(`${way} with ${HOLD}="${value}"`, refused, 'create', 'hold-web', value);
  }
  t.log(`refused create: ${(await createThreeWays(tenant, deployment('hold-web', { labels: { [HOLD]: 'false' } }))).create?.message}`);

  // A Deployment of their own is theirs; adding the label to it afterwards is refused like creating it so.
  const apps = tenant.makeApiClient(AppsV1Api);
  await apps.createNamespacedDeployment({ namespace: ns, body: deployment('hold-web') });
  const patch = (strategy: string, body: object) =>
    refusal(apps.patchNamespacedDeployment({ name: 'hold-web', namespace: ns, body }, patchAs(strategy)));
  holdRefused(
    'JSON patch',
    await patch(PatchStrategy.JsonPatch, [{ op: 'add', path: '/metadata/labels', value: { [HOLD]: 'false' } }]),
    'change',
    'hold-web',
    'false',
  );
  holdRefused('merge patch', await patch(PatchStrategy.MergePatch, { metadata: { labels: { [HOLD]: '' } } }), 'change', 'hold-web', '');
  holdRefused(
    'strategic merge patch',
    await patch(PatchStrategy.StrategicMergePatch, { metadata: { labels: { [HOLD]: 'TRUE' } } }),
    'change',
    'hold-web',
    'TRUE',
  );
  t.is(await patch(PatchStrategy.MergePatch, { metadata: { labels: { team: 'a' } } }), undefined, 'other labels stay theirs');
  t.is((await apps.readNamespacedDeployment({ name: 'hold-web', namespace: ns })).metadata?.labels?.[HOLD], undefined);
});

test('R1: a Deployment Knative would adopt is refused whatever apiVersion or kind its controller claims, or when its pods carry a Revision’s labels', async (t) => {
  const rev = await createRevision('adopt-00001');
  const name = `${rev.name}-deployment`;
  const controller = (apiVersion: string, kind: string, ownerName = rev.name): V1OwnerReference => ({
    apiVersion,
    kind,
    name: ownerName,
    uid: rev.uid,
    controller: true,
  });
  const attempts: [string, V1Deployment, string][] = [
    [
      'kind Revision under example.com/v1, no hash label',
      deployment(name, { owner: controller('example.com/v1', 'Revision') }),
      `Revision ${rev.name}`,
    ],
    ['kind Foo with the Revision’s uid', deployment(name, { owner: controller('example.com/v1', 'Foo', 'anything') }), 'a Revision'],
    ['kind Foo under v1 with the Revision’s uid', deployment(name, { owner: controller('v1', 'Foo', 'anything') }), 'a Revision'],
    [
      'no owner, pods labelled with its revisionUID',
      deployment('pods-uid', { podLabels: { 'serving.knative.dev/revisionUID': rev.uid } }),
      'a Revision',
    ],
    [
      'no owner, pods labelled with its name',
      deployment('pods-name', { podLabels: { 'serving.knative.dev/revision': rev.name } }),
      `Revision ${rev.name}`,
    ],
  ];
  for (const [what, body, of] of attempts) {
    for (const [way, refused] of Object.entries(await createThreeWays(tenant, body))) {
      t.is(refused?.code, 403, `${what} (${way})`);
      t.regex(refused?.message ?? '', /ValidatingAdmissionPolicy 'prestart-revision-deployments'/, `${what} (${way})`);
      t.true(
        (refused?.message ?? '').includes(
          `${TENANT} may not create Deployment ${body.metadata?.name} for ${of}: only Knative Serving makes a Revision's Deployment`,
        ),
        `${what} (${way}): ${refused?.message}`,
      );
    }
  }
  t.log(`refused: ${(await createThreeWays(tenant, attempts[1]?.[1] as V1Deployment)).create?.message}`);

  // What Knative would not take as the Revision's stays the tenant's to make.
  const apps = tenant.makeApiClient(AppsV1Api);
  const own: [string, V1Deployment][] = [
    [
      'a controller of kind Foo, not named <revision>-deployment',
      deployment('worker', { owner: controller('example.com/v1', 'Foo', 'anything') }),
    ],
    [
      'named <revision>-deployment, an ownerReference that is not a controller',
      { ...deployment(name, {}), metadata: { name, ownerReferences: [{ ...controller('example.com/v1', 'Foo'), controller: false }] } },
    ],
  ];
  for (const [what, body] of own) t.is(await refusal(apps.createNamespacedDeployment({ namespace: ns, body })), undefined, what);
  // Making the latter a controller afterwards is making it the Revision's.
  const adopt = await refusal(
    apps.patchNamespacedDeployment(
      { name, namespace: ns, body: [{ op: 'replace', path: '/metadata/ownerReferences/0/controller', value: true }] },
      patchAs(PatchStrategy.JsonPatch),
    ),
  );
  t.is(adopt?.code, 403);
  t.true((adopt?.message ?? '').includes(`${TENANT} may not change Deployment ${name} of a Revision`), adopt?.message);
});

test('R3: the Deployment Knative made for a released Revision cannot be relinked and changed, in one update or in two', async (t) => {
  const rev = await createRevision('live-00001');
  const name = `${rev.name}-deployment`;
  const podLabels = { 'serving.knative.dev/revision': rev.name, 'serving.knative.dev/revisionUID': rev.uid, app: rev.name };
  const owner: V1OwnerReference = {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Revision',
    name: rev.name,
    uid: rev.uid,
    controller: true,
  };
  // Knative makes it and changes it (its identity holds the verb write on revisiondeployments).
  const knativeApps = knative.makeApiClient(AppsV1Api);
  const made = deployment(name, { owner, labels: { ...podLabels, [HASH]: 'h1' }, podLabels, image: DIGEST('a') });
  made.spec = { ...made.spec, selector: { matchLabels: { 'serving.knative.dev/revisionUID': rev.uid } } } as V1Deployment['spec'];
  t.is(await refusal(knativeApps.createNamespacedDeployment({ namespace: ns, body: made })), undefined, 'Knative creates it');
  t.is(
    await refusal(
      knativeApps.patchNamespacedDeployment(
        {
          name,
          namespace: ns,
          body: {
            metadata: { labels: { [HASH]: 'h2' } },
            spec: { template: { spec: { containers: [{ name: 'user-container', image: DIGEST('b') }] } } },
          },
        },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
    undefined,
    'Knative updates it',
  );

  const apps = tenant.makeApiClient(AppsV1Api);
  const unscanned = 'dev.local/unscanned:v2';
  const changeRefused = (what: string, refused: { code: number; message: string } | undefined) => {
    t.is(refused?.code, 403, what);
    t.regex(refused?.message ?? '', /ValidatingAdmissionPolicy 'prestart-revision-deployments'/, what);
    t.true(
      (refused?.message ?? '').includes(`${TENANT} may not change Deployment ${name} of Revision ${rev.name}`),
      `${what}: ${refused?.message}`,
    );
  };
  // One update: owner and hash label gone, image changed.
  changeRefused(
    'JSON patch',
    await refusal(
      apps.patchNamespacedDeployment(
        {
          name,
          namespace: ns,
          body: [
            { op: 'remove', path: '/metadata/ownerReferences' },
            { op: 'remove', path: `/metadata/labels/${HASH.replace('/', '~1')}` },
            { op: 'replace', path: '/spec/template/spec/containers/0/image', value: unscanned },
          ],
        },
        patchAs(PatchStrategy.JsonPatch),
      ),
    ),
  );
  changeRefused(
    'merge patch',
    await refusal(
      apps.patchNamespacedDeployment(
        {
          name,
          namespace: ns,
          body: {
            metadata: { ownerReferences: null, labels: { [HASH]: null } },
            spec: { template: { spec: { containers: [{ name: 'user-container', image: unscanned }] } } },
          },
        },
        patchAs(PatchStrategy.MergePatch),
      ),
    ),
  );
  const current = await apps.readNamespacedDeployment({ name, namespace: ns });
  const replaced = structuredClone(current);
  // Unconditional (no resourceVersion): the deployment controller's status writes would otherwise
  // race this PUT into a 409 Conflict, which is not the refusal under test.
  delete replaced.metadata?.resourceVersion;
  delete replaced.metadata?.ownerReferences;
  delete replaced.metadata?.labels?.[HASH];
  const container = replaced.spec?.template.spec?.containers[0];
  if (container) container.image = unscanned;
  changeRefused('replace (PUT)', await refusal(apps.replaceNamespacedDeployment({ name, namespace: ns, body: replaced })));
  changeRefused(
    'server-side apply',
    await refusal(
      apps.patchNamespacedDeployment(
        {
          name,
          namespace: ns,
          fieldManager: 'tenant',
          force: true,
          body: {
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            metadata: { name },
            spec: { template: { spec: { containers: [{ name: 'user-container', image: unscanned }] } } },
          },
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
  );
  changeRefused(
    'dry run',
    await refusal(
      apps.patchNamespacedDeployment(
        {
          name,
          namespace: ns,
          dryRun: 'All',
          body: { spec: { template: { spec: { containers: [{ name: 'user-container', image: unscanned }] } } } },
        },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
  );

  // Two updates: orphaning it without touching the pods is open (the garbage collector does so) ...
  const orphaned = await refusal(
    apps.patchNamespacedDeployment(
      { name, namespace: ns, body: { metadata: { ownerReferences: null, labels: { [HASH]: null } } } },
      patchAs(PatchStrategy.MergePatch),
    ),
  );
  t.is(orphaned, undefined, 'orphaning is allowed');
  const after = await apps.readNamespacedDeployment({ name, namespace: ns });
  t.is(after.metadata?.ownerReferences, undefined);
  t.is(after.metadata?.labels?.[HASH], undefined);
  // ... but the orphan's pods still carry the Revision's labels (its selector is immutable): still guarded.
  const swap = await refusal(
    apps.patchNamespacedDeployment(
      { name, namespace: ns, body: { spec: { template: { spec: { containers: [{ name: 'user-container', image: unscanned }] } } } } },
      patchAs(PatchStrategy.StrategicMergePatch),
    ),
  );
  changeRefused('image change after orphaning', swap);
  t.log(`refused: ${swap?.message}`);
  changeRefused(
    'pod label change after orphaning',
    await refusal(
      apps.patchNamespacedDeployment(
        { name, namespace: ns, body: { spec: { template: { metadata: { labels: { app: 'mine' } } } } } },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
  );
  changeRefused(
    'adopting it back',
    await refusal(
      apps.patchNamespacedDeployment(
        { name, namespace: ns, body: { metadata: { ownerReferences: [owner] } } },
        patchAs(PatchStrategy.MergePatch),
      ),
    ),
  );
  changeRefused(
    'a hash label of its own',
    await refusal(
      apps.patchNamespacedDeployment(
        { name, namespace: ns, body: { metadata: { labels: { [HASH]: 'h2' } } } },
        patchAs(PatchStrategy.MergePatch),
      ),
    ),
  );
  t.is(
    (await apps.readNamespacedDeployment({ name, namespace: ns })).spec?.template.spec?.containers[0]?.image,
    DIGEST('b'),
    'it still runs what Knative wrote',
  );
  // Restarting and scaling stay open.
  const restart = await refusal(
    apps.patchNamespacedDeployment(
      {
        name,
        namespace: ns,
        body: { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } } } },
      },
      patchAs(PatchStrategy.StrategicMergePatch),
    ),
  );
  t.is(restart, undefined, 'kubectl rollout restart still works');
  const scale = await refusal(
    apps.patchNamespacedDeploymentScale({ name, namespace: ns, body: { spec: { replicas: 3 } } }, patchAs(PatchStrategy.MergePatch)),
  );
  t.is(scale, undefined, 'scaling still works');
});

test('R2: only Knative and the gate write the status of Knative Serving’s objects; a tenant’s status writes are refused whichever way', async (t) => {
  const rev = await createRevision('status-00001');
  const custom = (kc: KubeConfig) => kc.makeApiClient(CustomObjectsApi);
  const at = { ...SERVING, plural: 'revisions', name: rev.name };
  // Knative resolves the digest and writes it (and its conditions): allowed.
  const resolved = { containerStatuses: [{ name: 'user-container', imageDigest: DIGEST('a') }], observedGeneration: 1 };
  t.is(
    await refusal(
      custom(knative).patchNamespacedCustomObjectStatus({ ...at, body: { status: resolved } }, patchAs(PatchStrategy.MergePatch)),
    ),
    undefined,
    'Knative writes the Revision’s status',
  );
  // The gate writes its condition: allowed.
  const gateCondition = {
    type: 'PrestartHooksReady',
    status: 'Unknown',
    reason: 'Waiting',
    lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  };
  t.is(
    await refusal(
      custom(gate).patchNamespacedCustomObjectStatus(
        { ...at, body: { status: { conditions: [gateCondition] } } },
        patchAs(PatchStrategy.MergePatch),
      ),
    ),
    undefined,
    'the gate writes its condition',
  );

  const swapped = { containerStatuses: [{ name: 'user-container', imageDigest: DIGEST('e') }] };
  const live = (await custom(admin).getNamespacedCustomObjectStatus(at)) as object;
  const writes: [string, Promise<unknown>][] = [
    [
      'merge patch',
      custom(tenant).patchNamespacedCustomObjectStatus({ ...at, body: { status: swapped } }, patchAs(PatchStrategy.MergePatch)),
    ],
    [
      'JSON patch',
      custom(tenant).patchNamespacedCustomObjectStatus(
        { ...at, body: [{ op: 'replace', path: '/status/containerStatuses/0/imageDigest', value: DIGEST('e') }] },
        patchAs(PatchStrategy.JsonPatch),
      ),
    ],
    [
      'server-side apply',
      custom(tenant).patchNamespacedCustomObjectStatus(
        {
          ...at,
          fieldManager: 'tenant',
          force: true,
          body: { apiVersion: 'serving.knative.dev/v1', kind: 'Revision', metadata: { name: rev.name }, status: swapped },
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ],
    ['replace (PUT)', custom(tenant).replaceNamespacedCustomObjectStatus({ ...at, body: { ...live, status: swapped } })],
    [
      'dry run',
      custom(tenant).patchNamespacedCustomObjectStatus(
        { ...at, dryRun: 'All', body: { status: swapped } },
        patchAs(PatchStrategy.MergePatch),
      ),
    ],
  ];
  for (const [what, write] of writes) {
    const refused = await refusal(write);
    t.is(refused?.code, 403, what);
    t.regex(refused?.message ?? '', /ValidatingAdmissionPolicy 'prestart-knative-status'/, what);
    t.true(
      (refused?.message ?? '').includes(
        `${TENANT} may not write the status of Revision ${rev.name} in ${ns}: only Knative Serving's controller (and the knative-prestart gate) write it`,
      ),
      `${what}: ${refused?.message}`,
    );
  }
  t.log(`refused: ${(await tenantStatusPatch('revisions', rev.name, { status: swapped }))?.message}`);
  // Through the main resource status is not written at all (the CRD's status subresource).
  t.is(
    await refusal(
      custom(tenant).patchNamespacedCustomObject(
        { ...at, body: { metadata: { labels: { team: 'a' } }, status: swapped } },
        patchAs(PatchStrategy.MergePatch),
      ),
    ),
    undefined,
  );
  const after = (await custom(admin).getNamespacedCustomObject(at)) as { status?: { containerStatuses?: { imageDigest?: string }[] } };
  t.is(after.status?.containerStatuses?.[0]?.imageDigest, DIGEST('a'), 'the digest Knative resolved stands');
});

test('R2: the status of every Knative Serving kind is Knative’s, not a tenant’s', async (t) => {
  const api = admin.makeApiClient(CustomObjectsApi);
  const template = { spec: { containers: [{ image: 'dev.local/demo/app:v1' }] } };
  const objects: [string, string, string, object][] = [
    ['configurations', 'Configuration', 'v1', { template }],
    ['services', 'Service', 'v1', { template }],
    ['routes', 'Route', 'v1', { traffic: [{ revisionName: 'status-00001', percent: 100 }] }],
    ['domainmappings', 'DomainMapping', 'v1beta1', { ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: 'shop' } }],
  ];
  for (const [plural, kind, version, spec] of objects) {
    const name = kind === 'DomainMapping' ? 'shop.example.com' : 'shop';
    await api.createNamespacedCustomObject({
      ...SERVING,
      version,
      plural,
      body: { apiVersion: `serving.knative.dev/${version}`, kind, metadata: { name }, spec },
    });
    // A Configuration whose latest Ready Revision is the tenant's pick; a Route or Service Ready.
    const refused = await tenantStatusPatch(
      plural,
      name,
      { status: { latestReadyRevisionName: 'held-00001', conditions: [{ type: 'Ready', status: 'True' }] } },
      version,
    );
    t.is(refused?.code, 403, kind);
    t.true(
      (refused?.message ?? '').includes(
        `${TENANT} may not write the status of ${kind} ${name} in ${ns}: only Knative Serving's controller`,
      ),
      `${kind}: ${refused?.message}`,
    );
  }
  // Knative writes a Configuration's status.
  t.is(
    await refusal(
      knative
        .makeApiClient(CustomObjectsApi)
        .patchNamespacedCustomObjectStatus(
          { ...SERVING, plural: 'configurations', name: 'shop', body: { status: { observedGeneration: 1 } } },
          patchAs(PatchStrategy.MergePatch),
        ),
    ),
    undefined,
  );
});
