// A released Revision's pods and ReplicaSets, in the apiserver alone (no Knative, no gate): a
// namespace editor (`edit` with Knative's aggregated editor rules, ./_knative-editor.ts) tries what
// would make a Revision's pods run something its pre-start hooks never saw:
// - S1: re-image a running pod (strategic merge patch as `kubectl set image` sends it, JSON patch,
//   replace, server-side apply, dry run), or add an ephemeral container to it;
// - S2: pause the Revision's Deployment, re-image its ReplicaSet, make a second ReplicaSet or a
//   bare Pod with the Revision's labels;
// - S5: change the pod template's annotations of the Deployment (mutating webhooks read them).
// Policies 6 and 7 (config/220-revision-pods-policy.yaml) and policy 4 (prestart-revision-deployments,
// config/200-hold-policy.yaml) refuse each, while the cluster's own Deployment and ReplicaSet
// controllers (running here) still make the Revision's ReplicaSets and pods, Knative still writes
// its Deployment, and the tenant still restarts, scales (also while paused), deletes pods and
// keeps Pods and ReplicaSets of their own.
//
// "A released Revision" here is a Revision object and the Deployment Knative would make for it,
// created with Knative's identity; the real controllers then make its ReplicaSet and pods (on the
// kwok node: nothing runs, the objects are what is judged).
//
// The controls perform each attack with the policy's binding scoped away from a namespace of their
// own (spec.matchResources.namespaceSelector, patched outside the install's server-side apply, so
// another test file re-applying config/ meanwhile neither undoes it nor is affected by it: every
// other namespace stays guarded), and restore the binding afterwards.
import { randomBytes } from 'node:crypto';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { KNATIVE_CONTROLLER_USER, KNATIVE_NAMESPACE } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Pod,
  type V1ReplicaSet,
} from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { type Refusal, refusal } from '../../support/refusal.ts';
import { bindKnativeEditor } from './_knative-editor.ts';

const suffix = randomBytes(3).toString('hex');
const ns = `revpods-${suffix}`;
const ctl = `revpods-control-${suffix}`;
const TENANT = 'rp-editor';
const editorRole = `revpods-editor-${suffix}`;
const knativeRole = `revpods-knative-${suffix}`;
const DEPLOYMENT_CONTROLLER = 'system:serviceaccount:kube-system:deployment-controller';
const UID = 'serving.knative.dev/revisionUID';
const REV = 'serving.knative.dev/revision';
const HASH = 'serving.knative.dev/deployment-hash';
const INJECTED = 'prestart.dev/injected';
const RESTARTED = 'kubectl.kubernetes.io/restartedAt';
const SERVING = { group: 'serving.knative.dev', version: 'v1' };
/** What Knative resolved and the hooks were told of. */
const KNATIVE_IMAGE = `dev.local/demo/app@sha256:${'a'.repeat(64)}`;
/** What the tenant would rather run. */
const OTHER = 'dev.local/not-what-the-hooks-saw:v1';

let cluster: Cluster;
let admin: KubeConfig;
let tenant: KubeConfig;
let knative: KubeConfig;
let dropEditorRole: () => Promise<void> = async () => {};

const patchAs = (strategy: string) => setHeaderOptions('Content-Type', strategy);
const asDeploymentController = (strategy: string) =>
  setHeaderOptions('Impersonate-User', DEPLOYMENT_CONTROLLER, setHeaderOptions('Content-Type', strategy));
const setImage = (container = 'user-container', image = OTHER) => ({ spec: { containers: [{ name: container, image }] } });
const setTemplateImage = (image = OTHER) => ({ spec: { template: setImage('user-container', image) } });

async function kubeconfigOf(user: string, groups: string[]): Promise<KubeConfig> {
  const kc = new KubeConfig();
  kc.loadFromFile(await cluster.mintUserKubeconfig(user, groups));
  return kc;
}

interface Released {
  namespace: string;
  name: string;
  uid: string;
  deployment: string;
  replicaSet: string;
}

/**
 * A Revision and the Deployment Knative makes for it (as Knative's identity, with what Knative
 * puts there: owner, hash label, the Revision's labels on its pods selected by revisionUID, the
 * gate's projection marker), once the real Deployment controller has made its ReplicaSet and the
 * ReplicaSet controller its pod.
 */
async function released(namespace: string, name: string): Promise<Released> {
  const rev = (await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...SERVING,
    namespace,
    plural: 'revisions',
    body: {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Revision',
      metadata: { name, labels: { 'serving.knative.dev/configuration': name.replace(/-\d+$/, '') } },
      spec: { containers: [{ name: 'user-container', image: 'dev.local/demo/app:v1' }] },
    },
  })) as { metadata: { uid: string } };
  const uid = rev.metadata.uid;
  const labels = { [REV]: name, [UID]: uid, app: name };
  const deployment = `${name}-deployment`;
  await knative.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: {
        name: deployment,
        labels: { ...labels, [HASH]: 'h1' },
        ownerReferences: [
          { apiVersion: 'serving.knative.dev/v1', kind: 'Revision', name, uid, controller: true, blockOwnerDeletion: true },
        ],
      },
      spec: {
        replicas: 1,
        selector: { matchLabels: { [UID]: uid } },
        progressDeadlineSeconds: 600,
        revisionHistoryLimit: 0,
        template: {
          metadata: { labels, annotations: { [INJECTED]: 'run-uid' } },
          spec: { containers: [{ name: 'user-container', image: KNATIVE_IMAGE }] },
        },
      },
    },
  });
  const replicaSet = await waitFor(
    async () => {
      const list = await admin.makeApiClient(AppsV1Api).listNamespacedReplicaSet({ namespace, labelSelector: `${UID}=${uid}` });
      return list.items.find((rs) => rs.metadata?.ownerReferences?.[0]?.name === deployment)?.metadata?.name;
    },
    { what: `the ReplicaSet the Deployment controller makes for ${deployment}` },
  );
  await revisionPod(namespace, uid);
  return { namespace, name, uid, deployment, replicaSet };
}

/** A live pod of the Revision, made by its ReplicaSet (and matching `ok`). */
function revisionPod(namespace: string, uid: string, ok: (p: V1Pod) => boolean = () => true): Promise<V1Pod> {
  return waitFor(
    async () =>
      (await admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: `${UID}=${uid}` })).items.find(
        (p) => !p.metadata?.deletionTimestamp && p.metadata?.ownerReferences?.[0]?.kind === 'ReplicaSet' && ok(p),
      ),
    { what: `a pod of the Revision of uid ${uid}, made by its ReplicaSet` },
  );
}

const imageOf = (p: { spec?: { containers: { image?: string }[] } } | undefined) => p?.spec?.containers[0]?.image;

function refusedBy(t: ExecutionContext, policy: string, expected: string, what: string, refused: Refusal | undefined) {
  t.is(refused?.code, 403, `${what}: ${refused?.message}`);
  t.regex(refused?.message ?? '', new RegExp(`ValidatingAdmissionPolicy '${policy}'`), what);
  t.true((refused?.message ?? '').includes(expected), `${what}: ${refused?.message}`);
}

const bare = (name: string, labels: Record<string, string>, image = OTHER): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { containers: [{ name: 'user-container', image }] },
});

const replicaSet = (name: string, labels: Record<string, string>, podLabels: Record<string, string>, replicas = 0): V1ReplicaSet => ({
  apiVersion: 'apps/v1',
  kind: 'ReplicaSet',
  metadata: { name, labels },
  spec: {
    replicas,
    selector: { matchLabels: podLabels },
    template: { metadata: { labels: podLabels }, spec: { containers: [{ name: 'user-container', image: OTHER }] } },
  },
});

/** The policy's binding stops applying in the controls' namespace (every other stays guarded), or applies again. */
async function scopeAwayFromControls(binding: string, away: boolean): Promise<void> {
  await admin.makeApiClient(AdmissionregistrationV1Api).patchValidatingAdmissionPolicyBinding(
    {
      name: binding,
      body: {
        spec: {
          matchResources: away
            ? { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [ctl] }] } }
            : null,
        },
      },
    },
    patchAs(PatchStrategy.MergePatch),
  );
}

/** The three probes, as dry runs in `namespace`: a bare Pod and a ReplicaSet with the labels, pausing `d`. */
async function probes(namespace: string, d: Released): Promise<{ pods: boolean; replicaSets: boolean; deployments: boolean }> {
  const [pod, rs, pause] = await Promise.all([
    refusal(
      tenant
        .makeApiClient(CoreV1Api)
        .createNamespacedPod({ namespace, dryRun: 'All', body: bare(`probe-${randomBytes(2).toString('hex')}`, { [UID]: d.uid }) }),
    ),
    refusal(
      tenant
        .makeApiClient(AppsV1Api)
        .createNamespacedReplicaSet({ namespace, dryRun: 'All', body: replicaSet('probe', {}, { [UID]: d.uid }) }),
    ),
    refusal(
      tenant
        .makeApiClient(AppsV1Api)
        .patchNamespacedDeployment(
          { namespace, name: d.deployment, dryRun: 'All', body: { spec: { paused: true } } },
          patchAs(PatchStrategy.MergePatch),
        ),
    ),
  ]);
  return { pods: pod?.code === 403, replicaSets: rs?.code === 403, deployments: pause?.code === 403 };
}

let web: Released;
let live: Released;
let control: Released;
let chain: Released;

test.before(async () => {
  cluster = await installedCluster();
  admin = cluster.kubeConfig;
  for (const name of [ns, ctl]) await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  dropEditorRole = await bindKnativeEditor(admin, ns, TENANT, editorRole);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  for (const [name, role] of [
    [`${TENANT}-edit`, 'edit'],
    [`${TENANT}-knative-edit`, editorRole],
  ] as const) {
    await rbac.createNamespacedRoleBinding({
      namespace: ctl,
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
      },
    });
  }
  // Knative's controller: config/300-rbac.yaml binds it the policies' verb; Knative's own
  // ClusterRoles (not installed here) give it these API rights, which this stands in for.
  await rbac.createClusterRole({
    body: {
      metadata: { name: knativeRole },
      rules: [{ apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'create', 'update', 'patch'] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: knativeRole },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: knativeRole },
      subjects: [{ kind: 'ServiceAccount', name: 'controller', namespace: KNATIVE_NAMESPACE }],
    },
  });
  [tenant, knative] = await Promise.all([
    kubeconfigOf(TENANT, ['system:authenticated']),
    kubeconfigOf(KNATIVE_CONTROLLER_USER, [
      'system:serviceaccounts',
      `system:serviceaccounts:${KNATIVE_NAMESPACE}`,
      'system:authenticated',
    ]),
  ]);
  [web, live, control, chain] = await Promise.all([
    released(ns, 'web-00001'),
    released(ns, 'live-00001'),
    released(ctl, 'ctl-00001'),
    released(ctl, 'chain-00001'),
  ]);
  // The policies take effect a moment after they are created or changed: probe each new rule.
  await waitFor(async () => Object.values(await probes(ns, web)).every(Boolean), {
    what: 'the policies prestart-revision-pods, prestart-revision-replicasets and prestart-revision-deployments (as changed) to be in force',
  });
  for (const binding of ['prestart-revision-pods', 'prestart-revision-replicasets', 'prestart-revision-deployments']) {
    await scopeAwayFromControls(binding, true);
  }
  await waitFor(async () => !Object.values(await probes(ctl, control)).some(Boolean), {
    what: `the three bindings to stop applying in ${ctl}`,
  });
});

test.after.always(async () => {
  if (!admin) return;
  for (const binding of ['prestart-revision-pods', 'prestart-revision-replicasets', 'prestart-revision-deployments']) {
    await scopeAwayFromControls(binding, false).catch(() => undefined);
  }
  if (control) {
    await waitFor(async () => Object.values(await probes(ctl, control)).every(Boolean), {
      what: `the three bindings to apply again in ${ctl}`,
    }).catch(() => undefined);
  }
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.deleteClusterRoleBinding({ name: knativeRole }).catch(() => undefined);
  await rbac.deleteClusterRole({ name: knativeRole }).catch(() => undefined);
  await dropEditorRole();
  for (const name of [ns, ctl])
    await admin
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name })
      .catch(() => undefined);
});

test.serial('S1: a tenant cannot change what a released Revision’s running pod runs, whichever way it writes', async (t) => {
  const pod = await revisionPod(ns, web.uid);
  const name = pod.metadata?.name ?? '';
  const core = tenant.makeApiClient(CoreV1Api);
  const expected = `${TENANT} may not change what Pod ${name} of Revision ${web.name} runs`;
  const refused = (what: string, r: Refusal | undefined) => refusedBy(t, 'prestart-revision-pods', expected, what, r);

  refused(
    'kubectl set image (strategic merge patch)',
    await refusal(core.patchNamespacedPod({ namespace: ns, name, body: setImage() }, patchAs(PatchStrategy.StrategicMergePatch))),
  );
  refused(
    'JSON patch of /spec/containers/0/image',
    await refusal(
      core.patchNamespacedPod(
        { namespace: ns, name, body: [{ op: 'replace', path: '/spec/containers/0/image', value: OTHER }] },
        patchAs(PatchStrategy.JsonPatch),
      ),
    ),
  );
  const replaced = structuredClone(pod);
  // Unconditional (no resourceVersion): the kubelet's (kwok's) status writes would otherwise race
  // this PUT into a 409 Conflict, which is not the refusal under test.
  delete replaced.metadata?.resourceVersion;
  const container = replaced.spec?.containers[0];
  if (container) container.image = OTHER;
  refused('kubectl replace (PUT)', await refusal(core.replaceNamespacedPod({ namespace: ns, name, body: replaced })));
  refused(
    'server-side apply',
    await refusal(
      core.patchNamespacedPod(
        {
          namespace: ns,
          name,
          fieldManager: 'tenant',
          force: true,
          body: { apiVersion: 'v1', kind: 'Pod', metadata: { name }, ...setImage() },
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
  );
  refused(
    'dry run',
    await refusal(
      core.patchNamespacedPod({ namespace: ns, name, dryRun: 'All', body: setImage() }, patchAs(PatchStrategy.StrategicMergePatch)),
    ),
  );
  // Dropping the Revision's labels in the same update does not escape: the pod had them.
  refused(
    'labels removed and image changed in one JSON patch',
    await refusal(
      core.patchNamespacedPod(
        {
          namespace: ns,
          name,
          body: [
            { op: 'remove', path: `/metadata/labels/${UID.replace('/', '~1')}` },
            { op: 'remove', path: `/metadata/labels/${REV.replace('/', '~1')}` },
            { op: 'replace', path: '/spec/containers/0/image', value: OTHER },
          ],
        },
        patchAs(PatchStrategy.JsonPatch),
      ),
    ),
  );
  t.log(
    `refused: ${(await refusal(core.patchNamespacedPod({ namespace: ns, name, body: setImage() }, patchAs(PatchStrategy.StrategicMergePatch))))?.message}`,
  );

  // `edit` does not grant pods/ephemeralcontainers; an admin who grants it for `kubectl debug`
  // still gets no foreign image into a Revision's pod.
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({
    namespace: ns,
    body: {
      metadata: { name: 'debugger' },
      rules: [{ apiGroups: [''], resources: ['pods/ephemeralcontainers'], verbs: ['get', 'patch', 'update'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'debugger' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'debugger' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
    },
  });
  const debug = await waitFor(
    async () => {
      const r = await refusal(
        core.patchNamespacedPodEphemeralcontainers(
          {
            namespace: ns,
            name,
            body: { spec: { ephemeralContainers: [{ name: 'debugger', image: OTHER, targetContainerName: 'user-container' }] } },
          },
          patchAs(PatchStrategy.StrategicMergePatch),
        ),
      );
      // RBAC first refuses with its own 403 until the RoleBinding is seen.
      return r?.message.includes('ValidatingAdmissionPolicy') ? r : undefined;
    },
    { what: 'the ephemeral container refused by the policy' },
  );
  refusedBy(
    t,
    'prestart-revision-pods',
    `${TENANT} may not add or change ephemeral containers of Pod ${name} of Revision ${web.name} (kubectl debug)`,
    'ephemeral container',
    debug,
  );
  t.log(`refused: ${debug.message}`);

  const after = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name });
  t.is(imageOf(after), KNATIVE_IMAGE, 'the pod still runs what Knative wrote');
  t.deepEqual(after.spec?.ephemeralContainers ?? [], []);
  t.is(after.metadata?.labels?.[UID], web.uid);
});

test.serial('a tenant cannot make pods carry a Revision’s labels: a bare Pod, or a label added to a pod of their own', async (t) => {
  const core = tenant.makeApiClient(CoreV1Api);
  const byUid = await refusal(core.createNamespacedPod({ namespace: ns, body: bare('joiner', { [UID]: web.uid }) }));
  refusedBy(
    t,
    'prestart-revision-pods',
    `${TENANT} may not create Pod joiner with the labels of the Revision of uid ${web.uid} (serving.knative.dev/revision or revisionUID): pods with them join the Revision's private Service`,
    'a bare Pod with the revisionUID label',
    byUid,
  );
  t.log(`refused: ${byUid?.message}`);
  const expected = `${TENANT} may not create Pod joiner with the labels of Revision ${web.name}`;
  refusedBy(
    t,
    'prestart-revision-pods',
    expected,
    'a bare Pod with the revision label',
    await refusal(core.createNamespacedPod({ namespace: ns, body: bare('joiner', { [REV]: web.name }) })),
  );
  refusedBy(
    t,
    'prestart-revision-pods',
    expected,
    'server-side apply',
    await refusal(
      core.patchNamespacedPod(
        { namespace: ns, name: 'joiner', fieldManager: 'tenant', force: true, body: bare('joiner', { [UID]: web.uid, [REV]: web.name }) },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
  );
  refusedBy(
    t,
    'prestart-revision-pods',
    expected,
    'dry run',
    await refusal(core.createNamespacedPod({ namespace: ns, dryRun: 'All', body: bare('joiner', { [UID]: web.uid, [REV]: web.name }) })),
  );
  refusedBy(
    t,
    'prestart-revision-pods',
    `${TENANT} may not create Pod joiner-`,
    'generateName',
    await refusal(
      core.createNamespacedPod({
        namespace: ns,
        body: { ...bare('', { [UID]: web.uid }), metadata: { generateName: 'joiner-', labels: { [UID]: web.uid } } },
      }),
    ),
  );

  // A pod of their own is theirs, image changes included; giving it the label later is not.
  t.is(await refusal(core.createNamespacedPod({ namespace: ns, body: bare('plain', { app: 'plain' }) })), undefined, 'their own pod');
  t.is(
    await refusal(
      core.patchNamespacedPod(
        { namespace: ns, name: 'plain', body: setImage('user-container', 'dev.local/theirs:v2') },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
    undefined,
    'their own pod’s image',
  );
  const relabel = await refusal(
    core.patchNamespacedPod(
      { namespace: ns, name: 'plain', body: { metadata: { labels: { [UID]: web.uid } } } },
      patchAs(PatchStrategy.MergePatch),
    ),
  );
  refusedBy(
    t,
    'prestart-revision-pods',
    `${TENANT} may not give Pod plain the labels of the Revision of uid ${web.uid}`,
    'the label added later',
    relabel,
  );
  t.log(`refused: ${relabel?.message}`);
  refusedBy(
    t,
    'prestart-revision-pods',
    `${TENANT} may not give Pod plain the labels of Revision ${web.name}`,
    'the label added later by server-side apply',
    await refusal(
      core.patchNamespacedPod(
        {
          namespace: ns,
          name: 'plain',
          fieldManager: 'tenant',
          force: true,
          body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'plain', labels: { [REV]: web.name } } },
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
  );
  t.is(
    (await admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ns, labelSelector: `${UID}=${web.uid}` })).items.filter(
      (p) => p.metadata?.ownerReferences?.[0]?.kind !== 'ReplicaSet',
    ).length,
    0,
    'no pod of the tenant’s joins the Revision',
  );
});

test.serial('S2: a tenant cannot change the pod template of a released Revision’s ReplicaSet, nor make a second one', async (t) => {
  const apps = tenant.makeApiClient(AppsV1Api);
  const name = web.replicaSet;
  const expected = `${TENANT} may not change the pod template of ReplicaSet ${name} of Revision ${web.name}`;
  const refused = (what: string, r: Refusal | undefined) => refusedBy(t, 'prestart-revision-replicasets', expected, what, r);
  const patch = (strategy: string, body: object) =>
    refusal(apps.patchNamespacedReplicaSet({ namespace: ns, name, body }, patchAs(strategy)));

  const setImageRefused = await patch(PatchStrategy.StrategicMergePatch, setTemplateImage());
  refused('kubectl set image rs (strategic merge patch)', setImageRefused);
  t.log(`refused: ${setImageRefused?.message}`);
  refused(
    'JSON patch',
    await patch(PatchStrategy.JsonPatch, [{ op: 'replace', path: '/spec/template/spec/containers/0/image', value: OTHER }]),
  );
  const current = await apps.readNamespacedReplicaSet({ namespace: ns, name });
  const replaced = structuredClone(current);
  delete replaced.metadata?.resourceVersion;
  const container = replaced.spec?.template?.spec?.containers[0];
  if (container) container.image = OTHER;
  refused('kubectl replace (PUT)', await refusal(apps.replaceNamespacedReplicaSet({ namespace: ns, name, body: replaced })));
  refused(
    'server-side apply',
    await refusal(
      apps.patchNamespacedReplicaSet(
        {
          namespace: ns,
          name,
          fieldManager: 'tenant',
          force: true,
          body: { apiVersion: 'apps/v1', kind: 'ReplicaSet', metadata: { name }, ...setTemplateImage() },
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
  );
  refused(
    'dry run',
    await refusal(
      apps.patchNamespacedReplicaSet(
        { namespace: ns, name, dryRun: 'All', body: setTemplateImage() },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
  );
  refused(
    'a sidecar-image annotation on its pod template',
    await patch(PatchStrategy.MergePatch, {
      spec: { template: { metadata: { annotations: { 'sidecar.istio.io/proxyImage': OTHER } } } },
    }),
  );
  refused('a pod template label', await patch(PatchStrategy.MergePatch, { spec: { template: { metadata: { labels: { app: 'mine' } } } } }));
  t.is(imageOf((await apps.readNamespacedReplicaSet({ namespace: ns, name })).spec?.template), KNATIVE_IMAGE, 'its template is as it was');

  // A second ReplicaSet with the Revision's labels, on its pods or on itself (the Deployment
  // controller would adopt it).
  const second = await refusal(
    apps.createNamespacedReplicaSet({ namespace: ns, body: replicaSet('second', {}, { [UID]: web.uid, [REV]: web.name }, 1) }),
  );
  refusedBy(
    t,
    'prestart-revision-replicasets',
    `${TENANT} may not create ReplicaSet second with the labels of Revision ${web.name} (serving.knative.dev/revision or revisionUID, on it or its pod template): its pods would join the Revision's private Service`,
    'a second ReplicaSet',
    second,
  );
  t.log(`refused: ${second?.message}`);
  refusedBy(
    t,
    'prestart-revision-replicasets',
    `${TENANT} may not create ReplicaSet adoptee with the labels of a Revision`,
    'a ReplicaSet labelled for adoption',
    await refusal(apps.createNamespacedReplicaSet({ namespace: ns, body: replicaSet('adoptee', { [UID]: web.uid }, { app: 'adoptee' }) })),
  );
  refusedBy(
    t,
    'prestart-revision-replicasets',
    `${TENANT} may not create ReplicaSet second with the labels of Revision ${web.name}`,
    'server-side apply',
    await refusal(
      apps.patchNamespacedReplicaSet(
        {
          namespace: ns,
          name: 'second',
          fieldManager: 'tenant',
          force: true,
          body: replicaSet('second', {}, { [UID]: web.uid, [REV]: web.name }),
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
  );

  // ReplicaSets of their own are theirs; giving one the Revision's label later is not.
  t.is(await refusal(apps.createNamespacedReplicaSet({ namespace: ns, body: replicaSet('own', {}, { app: 'own' }) })), undefined);
  t.is(
    await refusal(
      apps.patchNamespacedReplicaSet(
        { namespace: ns, name: 'own', body: setTemplateImage('dev.local/theirs:v2') },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
    undefined,
    'their own ReplicaSet’s template',
  );
  refusedBy(
    t,
    'prestart-revision-replicasets',
    `${TENANT} may not give ReplicaSet own the labels of a Revision`,
    'the label added later',
    await refusal(
      apps.patchNamespacedReplicaSet(
        { namespace: ns, name: 'own', body: { metadata: { labels: { [UID]: web.uid } } } },
        patchAs(PatchStrategy.MergePatch),
      ),
    ),
  );
});

test.serial(
  'S2, S5: a tenant cannot pause a released Revision’s Deployment, change how it rolls out, or its pods’ annotations',
  async (t) => {
    const apps = tenant.makeApiClient(AppsV1Api);
    const expected = `${TENANT} may not change Deployment ${web.deployment} of Revision ${web.name}: only Knative Serving makes a Revision's Deployment`;
    const patch = (strategy: string, body: object) =>
      refusal(apps.patchNamespacedDeployment({ namespace: ns, name: web.deployment, body }, patchAs(strategy)));
    const attempts: [string, Promise<Refusal | undefined>][] = [
      ['kubectl rollout pause (strategic merge patch)', patch(PatchStrategy.StrategicMergePatch, { spec: { paused: true } })],
      ['spec.paused by JSON patch', patch(PatchStrategy.JsonPatch, [{ op: 'add', path: '/spec/paused', value: true }])],
      [
        'spec.paused by server-side apply',
        refusal(
          apps.patchNamespacedDeployment(
            {
              namespace: ns,
              name: web.deployment,
              fieldManager: 'tenant',
              force: true,
              body: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: web.deployment }, spec: { paused: true } },
            },
            patchAs(PatchStrategy.ServerSideApply),
          ),
        ),
      ],
      ['spec.strategy', patch(PatchStrategy.MergePatch, { spec: { strategy: { type: 'Recreate', rollingUpdate: null } } })],
      ['spec.minReadySeconds', patch(PatchStrategy.MergePatch, { spec: { minReadySeconds: 30 } })],
      ['spec.progressDeadlineSeconds', patch(PatchStrategy.MergePatch, { spec: { progressDeadlineSeconds: 2147483647 } })],
      [
        'a sidecar-image annotation on the pod template (S5)',
        patch(PatchStrategy.StrategicMergePatch, {
          spec: { template: { metadata: { annotations: { 'sidecar.istio.io/proxyImage': OTHER } } } },
        }),
      ],
      [
        'the gate’s projection marker removed from the pod template',
        patch(PatchStrategy.JsonPatch, [{ op: 'remove', path: `/spec/template/metadata/annotations/${INJECTED.replace('/', '~1')}` }]),
      ],
    ];
    for (const [what, attempt] of attempts) refusedBy(t, 'prestart-revision-deployments', expected, what, await attempt);
    t.log(`refused: ${(await patch(PatchStrategy.MergePatch, { spec: { paused: true } }))?.message}`);
    const after = await apps.readNamespacedDeployment({ namespace: ns, name: web.deployment });
    t.falsy(after.spec?.paused);
    t.is(after.spec?.strategy?.type, 'RollingUpdate');
    t.deepEqual(after.spec?.template.metadata?.annotations, { [INJECTED]: 'run-uid' });
  },
);

test.serial(
  'the cluster’s controllers, Knative and the tenant still do their part: restart, scale (also paused), delete pods',
  async (t) => {
    const apps = tenant.makeApiClient(AppsV1Api);
    // Knative changes what it owns: the pods' annotations (the gate's projection happens inside
    // Knative's request) and its rollout settings (from the Revision's annotations and its config).
    t.is(
      await refusal(
        knative.makeApiClient(AppsV1Api).patchNamespacedDeployment(
          {
            namespace: ns,
            name: live.deployment,
            body: { spec: { progressDeadlineSeconds: 120, template: { metadata: { annotations: { [INJECTED]: 'run-uid-2' } } } } },
          },
          patchAs(PatchStrategy.StrategicMergePatch),
        ),
      ),
      undefined,
      'Knative changes its Deployment’s pod annotations and progress deadline',
    );
    const withProjection = await waitFor(
      async () =>
        (await admin.makeApiClient(AppsV1Api).listNamespacedReplicaSet({ namespace: ns, labelSelector: `${UID}=${live.uid}` })).items.find(
          (rs) => rs.spec?.template?.metadata?.annotations?.[INJECTED] === 'run-uid-2',
        ),
      { what: 'the ReplicaSet the Deployment controller makes for Knative’s new template' },
    );
    t.truthy(withProjection, 'the Deployment controller made the new ReplicaSet');

    // kubectl rollout restart: a new ReplicaSet (the Deployment controller's) of the same template.
    const restartedAt = new Date().toISOString();
    t.is(
      await refusal(
        apps.patchNamespacedDeployment(
          {
            namespace: ns,
            name: live.deployment,
            body: { spec: { template: { metadata: { annotations: { [RESTARTED]: restartedAt } } } } },
          },
          patchAs(PatchStrategy.StrategicMergePatch),
        ),
      ),
      undefined,
      'kubectl rollout restart',
    );
    await waitFor(
      async () =>
        (await admin.makeApiClient(AppsV1Api).listNamespacedReplicaSet({ namespace: ns, labelSelector: `${UID}=${live.uid}` })).items.find(
          (rs) => rs.spec?.template?.metadata?.annotations?.[RESTARTED] === restartedAt,
        ),
      { what: 'the restarted ReplicaSet' },
    );
    const restarted = await revisionPod(ns, live.uid, (p) => p.metadata?.annotations?.[RESTARTED] === restartedAt);
    t.is(imageOf(restarted), KNATIVE_IMAGE, 'the ReplicaSet controller made the restarted pod, with Knative’s image');

    // Other labels and annotations of a Revision's pod stay the tenant's; deleting it is too.
    const core = tenant.makeApiClient(CoreV1Api);
    const podName = restarted.metadata?.name ?? '';
    t.is(
      await refusal(
        core.patchNamespacedPod(
          { namespace: ns, name: podName, body: { metadata: { labels: { debug: 'yes' }, annotations: { note: 'looked at' } } } },
          patchAs(PatchStrategy.MergePatch),
        ),
      ),
      undefined,
      'kubectl label / annotate pod',
    );
    t.is(await refusal(core.deleteNamespacedPod({ namespace: ns, name: podName, gracePeriodSeconds: 0 })), undefined, 'kubectl delete pod');
    const again = await revisionPod(
      ns,
      live.uid,
      (p) => p.metadata?.name !== podName && p.metadata?.annotations?.[RESTARTED] === restartedAt,
    );
    t.is(imageOf(again), KNATIVE_IMAGE, 'its ReplicaSet made it again as it was');

    // Scaling stays open, also while the Deployment is paused (by a cluster admin here: Knative
    // never pauses, and the tenant may not): it only scales the current ReplicaSet, whose template
    // is guarded, so nothing new runs.
    const adminApps = admin.makeApiClient(AppsV1Api);
    await adminApps.patchNamespacedDeployment(
      { namespace: ns, name: live.deployment, body: { spec: { paused: true } } },
      patchAs(PatchStrategy.MergePatch),
    );
    t.is(
      await refusal(
        apps.patchNamespacedDeploymentScale(
          { namespace: ns, name: live.deployment, body: { spec: { replicas: 3 } } },
          patchAs(PatchStrategy.MergePatch),
        ),
      ),
      undefined,
      'kubectl scale of the paused Deployment (scale subresource)',
    );
    const scaled = await waitFor(
      async () => {
        const pods = (
          await admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ns, labelSelector: `${UID}=${live.uid}` })
        ).items.filter((p) => !p.metadata?.deletionTimestamp);
        return pods.length >= 3 ? pods : undefined;
      },
      { what: 'three pods of the paused, scaled Deployment' },
    );
    t.deepEqual([...new Set(scaled.map(imageOf))], [KNATIVE_IMAGE], 'every pod runs Knative’s image');
    await adminApps.patchNamespacedDeployment(
      { namespace: ns, name: live.deployment, body: { spec: { paused: false } } },
      patchAs(PatchStrategy.MergePatch),
    );
  },
);

test.serial('the Deployment controller’s identity makes and changes a Revision’s ReplicaSets; the tenant cannot', async (t) => {
  // A ReplicaSet with a Revision's labels that no Deployment selects (its uid is no live
  // Revision's): the policy judges the labels, not who owns it.
  const labels = { [UID]: '0b0b0b0b-0000-4000-8000-000000000000', [REV]: 'gone-00001' };
  const body = replicaSet('by-controller', {}, labels);
  body.spec = {
    ...body.spec,
    template: { ...body.spec?.template, spec: { containers: [{ name: 'user-container', image: KNATIVE_IMAGE }] } },
  } as V1ReplicaSet['spec'];
  const admins = admin.makeApiClient(AppsV1Api);
  t.is(
    await refusal(admins.createNamespacedReplicaSet({ namespace: ns, body }, asDeploymentController('application/json'))),
    undefined,
    'created as the Deployment controller (impersonated)',
  );
  t.is(
    await refusal(
      admins.patchNamespacedReplicaSet(
        { namespace: ns, name: 'by-controller', body: setTemplateImage(`dev.local/demo/app@sha256:${'b'.repeat(64)}`) },
        asDeploymentController(PatchStrategy.StrategicMergePatch),
      ),
    ),
    undefined,
    'its template changed as the Deployment controller (a rollout)',
  );
  refusedBy(
    t,
    'prestart-revision-replicasets',
    `${TENANT} may not change the pod template of ReplicaSet by-controller of Revision gone-00001`,
    'the same change by the tenant',
    await refusal(
      tenant
        .makeApiClient(AppsV1Api)
        .patchNamespacedReplicaSet(
          { namespace: ns, name: 'by-controller', body: setTemplateImage() },
          patchAs(PatchStrategy.StrategicMergePatch),
        ),
    ),
  );
  // Scaling it stays open: the same template, more pods.
  t.is(
    await refusal(
      tenant
        .makeApiClient(AppsV1Api)
        .patchNamespacedReplicaSetScale(
          { namespace: ns, name: 'by-controller', body: { spec: { replicas: 1 } } },
          patchAs(PatchStrategy.MergePatch),
        ),
    ),
    undefined,
    'kubectl scale rs',
  );
});

// Controls: each attack above, with the policy's binding scoped away from this namespace.

test.serial('control S1: without prestart-revision-pods, the tenant re-images the Revision’s running pod', async (t) => {
  const pod = await revisionPod(ctl, control.uid);
  const name = pod.metadata?.name ?? '';
  t.is(
    await refusal(
      tenant
        .makeApiClient(CoreV1Api)
        .patchNamespacedPod({ namespace: ctl, name, body: setImage() }, patchAs(PatchStrategy.StrategicMergePatch)),
    ),
    undefined,
  );
  const after = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ctl, name });
  t.is(imageOf(after), OTHER, 'the kubelet would restart it on the tenant’s image');
  t.is(after.metadata?.labels?.[UID], control.uid, 'and it stays in the Revision’s endpoints');
});

test.serial('control: without prestart-revision-pods, the tenant’s bare Pod carries the Revision’s label', async (t) => {
  t.is(
    await refusal(tenant.makeApiClient(CoreV1Api).createNamespacedPod({ namespace: ctl, body: bare('joiner', { [UID]: control.uid }) })),
    undefined,
  );
  const selected = await admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ctl, labelSelector: `${UID}=${control.uid}` });
  t.true(
    selected.items.some((p) => p.metadata?.name === 'joiner'),
    'the Revision’s selector (its private Service’s) takes it in',
  );
});

test.serial(
  'control S2: without the Deployment and ReplicaSet policies, pause, re-image the ReplicaSet, delete the pod: it comes back on the tenant’s image',
  async (t) => {
    const apps = tenant.makeApiClient(AppsV1Api);
    t.is(
      await refusal(
        apps.patchNamespacedDeployment(
          { namespace: ctl, name: chain.deployment, body: { spec: { paused: true } } },
          patchAs(PatchStrategy.StrategicMergePatch),
        ),
      ),
      undefined,
      'kubectl rollout pause',
    );
    t.is(
      await refusal(
        apps.patchNamespacedReplicaSet(
          { namespace: ctl, name: chain.replicaSet, body: setTemplateImage() },
          patchAs(PatchStrategy.StrategicMergePatch),
        ),
      ),
      undefined,
      'kubectl set image rs',
    );
    const pod = await revisionPod(ctl, chain.uid);
    await tenant.makeApiClient(CoreV1Api).deleteNamespacedPod({ namespace: ctl, name: pod.metadata?.name ?? '', gracePeriodSeconds: 0 });
    const back = await revisionPod(ctl, chain.uid, (p) => imageOf(p) === OTHER);
    t.is(back.metadata?.labels?.[UID], chain.uid, 'the Revision’s pod now runs the tenant’s image');
    const d = await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: ctl, name: chain.deployment });
    t.is(imageOf(d.spec?.template), KNATIVE_IMAGE, 'while its Deployment still shows what the hooks saw');
  },
);

test.serial(
  'control: without prestart-revision-replicasets, a second ReplicaSet with the Revision’s labels makes pods that join it',
  async (t) => {
    t.is(
      await refusal(
        tenant
          .makeApiClient(AppsV1Api)
          .createNamespacedReplicaSet({ namespace: ctl, body: replicaSet('second', {}, { [UID]: control.uid, app: 'second' }, 1) }),
      ),
      undefined,
    );
    const joined = await waitFor(
      async () =>
        (await admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ctl, labelSelector: `${UID}=${control.uid},app=second` }))
          .items[0],
      { what: 'a pod of the second ReplicaSet' },
    );
    t.is(imageOf(joined), OTHER);
  },
);

test.serial('control S5: without prestart-revision-deployments, the tenant sets a sidecar image on the Deployment’s pods', async (t) => {
  t.is(
    await refusal(
      tenant.makeApiClient(AppsV1Api).patchNamespacedDeployment(
        {
          namespace: ctl,
          name: control.deployment,
          body: { spec: { template: { metadata: { annotations: { 'sidecar.istio.io/proxyImage': OTHER } } } } },
        },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    ),
    undefined,
  );
  const d = await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: ctl, name: control.deployment });
  t.is(d.spec?.template.metadata?.annotations?.['sidecar.istio.io/proxyImage'], OTHER);
  t.is(d.metadata?.labels?.[HASH], 'h1', 'the hash label Knative compares is unchanged: Knative would leave it so');
});
