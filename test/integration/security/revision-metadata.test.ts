// A Revision the hooks were asked about keeps the labels and annotations they were told of
// (config/200-hold-policy.yaml, policy 6: prestart-revision-metadata), in the apiserver alone:
// Knative copies them onto the Revision's Deployment and pods, where annotation-driven injectors
// (a mesh proxy's image, a runtime handler) read them, so an edit after the hooks answered would
// run what no hook judged. A namespace editor (`edit` with Knative's aggregated editor rules) tries
// merge, JSON and server-side apply patches and a replace; Knative's controller (it keeps the
// routing labels) and the gate still write; a Revision no hook stamped stays the tenant's to
// label. The control scopes the policy's binding away from a namespace of its own and performs the
// attack there.
import { randomBytes } from 'node:crypto';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { GATE_GROUPS, GATE_USER, installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { KNATIVE_CONTROLLER_USER, KNATIVE_NAMESPACE } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import test from 'ava';
import { refusal } from '../../support/refusal.ts';
import { bindKnativeEditor } from './_knative-editor.ts';

const suffix = randomBytes(3).toString('hex');
const ns = `revmeta-${suffix}`;
const ctl = `revmeta-control-${suffix}`;
const TENANT = 'revmeta-editor';
const editorRole = `revmeta-editor-${suffix}`;
const knativeRole = `revmeta-knative-${suffix}`;
const BINDING = 'prestart-revision-metadata';
const HOOKS = 'prestart.dev/hooks';
const PROXY_IMAGE = 'sidecar.istio.io/proxyImage';
const REFUSED = new RegExp(`ValidatingAdmissionPolicy '${BINDING}'.*${TENANT} may not change the labels or annotations of Revision`);
const REFUSED_EITHER = new RegExp(
  `ValidatingAdmissionPolicy '(${BINDING}' .*${TENANT} may not change the labels or annotations|prestart-protect-revisions' .*${TENANT} may not change the prestart.dev/hold)`,
);

let cluster: Cluster;
let admin: KubeConfig;
let tenant: KubeConfig;
let knative: KubeConfig;
let gate: KubeConfig;
const drops: (() => Promise<void>)[] = [];

const patchAs = (strategy: string) => setHeaderOptions('Content-Type', strategy);
const revisions = (namespace: string) => ({ group: 'serving.knative.dev', version: 'v1', plural: 'revisions', namespace });

async function kubeconfigOf(user: string, groups: string[]): Promise<KubeConfig> {
  const kc = new KubeConfig();
  kc.loadFromFile(await cluster.mintUserKubeconfig(user, groups));
  return kc;
}

/**
 * A Revision as the gate leaves it once stamped (`hooks`), or one no hook matched. No PrestartHook
 * matches it, so a stamp at create would strip the annotation (the apiserver's, config/230): the
 * admin writes it right after, as only the gate or an admin may.
 */
async function createRevision(namespace: string, name: string, hooks?: string): Promise<void> {
  const custom = admin.makeApiClient(CustomObjectsApi);
  await custom.createNamespacedCustomObject({
    ...revisions(namespace),
    body: {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Revision',
      metadata: { name, labels: { app: 'shop' } },
      spec: { containers: [{ name: 'user-container', image: 'dev.local/demo/app:v1' }] },
    },
  });
  if (hooks) {
    await custom.patchNamespacedCustomObject(
      { ...revisions(namespace), name, body: { metadata: { annotations: { [HOOKS]: hooks } } } },
      patchAs(PatchStrategy.MergePatch),
    );
  }
}

/** Whether the policy refuses the tenant a label change in `namespace` now: a new value each time, so an accepted probe is no no-op for the next. */
async function policyRefuses(namespace: string): Promise<boolean> {
  const refused = await patch(tenant, namespace, 'probe-00001', { metadata: { labels: { probe: randomBytes(4).toString('hex') } } });
  return refused?.code === 403 && refused.message.includes(`ValidatingAdmissionPolicy '${BINDING}'`);
}

const patch = (kc: KubeConfig, namespace: string, name: string, body: object, strategy: string = PatchStrategy.MergePatch) =>
  refusal(kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...revisions(namespace), name, body }, patchAs(strategy)));

/** The policy's binding stops applying in the control's namespace, or applies again. */
async function scopeAwayFromControl(away: boolean): Promise<void> {
  await admin.makeApiClient(AdmissionregistrationV1Api).patchValidatingAdmissionPolicyBinding(
    {
      name: BINDING,
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

test.before(async () => {
  cluster = await installedCluster();
  admin = cluster.kubeConfig;
  for (const name of [ns, ctl]) await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  drops.push(await bindKnativeEditor(admin, ns, TENANT, editorRole));
  drops.push(await bindKnativeEditor(admin, ctl, TENANT, `${editorRole}-ctl`));
  // Knative's controller keeps a Revision's routing labels: its own ClusterRoles (not installed
  // here) give it that right, which this stands in for; config/300-rbac.yaml binds it the verb.
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: knativeRole },
      rules: [{ apiGroups: ['serving.knative.dev'], resources: ['revisions'], verbs: ['get', 'patch'] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: knativeRole },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: knativeRole },
      subjects: [{ kind: 'ServiceAccount', name: 'controller', namespace: KNATIVE_NAMESPACE }],
    },
  });
  drops.push(async () => {
    await rbac.deleteClusterRoleBinding({ name: knativeRole }).catch(() => undefined);
    await rbac.deleteClusterRole({ name: knativeRole }).catch(() => undefined);
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
  for (const namespace of [ns, ctl]) await createRevision(namespace, 'probe-00001', 'scan');
  // A policy, and the tenant's bindings, take effect a moment after they are created: wait until the policy refuses.
  for (const namespace of [ns, ctl])
    await waitFor(() => policyRefuses(namespace), { what: `the policy ${BINDING} to be in force in ${namespace}` });
});

test.after.always(async () => {
  if (!admin) return;
  await scopeAwayFromControl(false).catch(() => undefined);
  for (const drop of drops) await drop();
  for (const name of [ns, ctl])
    await admin
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name })
      .catch(() => undefined);
});

test('a tenant cannot change the labels or annotations of a Revision the hooks were asked about, whichever way it writes', async (t) => {
  await createRevision(ns, 'shop-00001', 'scan');
  const custom = tenant.makeApiClient(CustomObjectsApi);
  const attempts = {
    'merge patch: a mesh proxy image': await patch(tenant, ns, 'shop-00001', {
      metadata: { annotations: { [PROXY_IMAGE]: 'evil/proxy:1' } },
    }),
    'merge patch: an annotation that picks another runtime': await patch(tenant, ns, 'shop-00001', {
      metadata: { annotations: { 'io.kubernetes.cri.untrusted-workload': 'true' } },
    }),
    'merge patch: a label': await patch(tenant, ns, 'shop-00001', { metadata: { labels: { app: 'other' } } }),
    'JSON patch: remove the hooks annotation': await patch(
      tenant,
      ns,
      'shop-00001',
      [{ op: 'remove', path: '/metadata/annotations/prestart.dev~1hooks' }],
      PatchStrategy.JsonPatch,
    ),
    'server-side apply': await refusal(
      custom.patchNamespacedCustomObject(
        {
          ...revisions(ns),
          name: 'shop-00001',
          body: {
            apiVersion: 'serving.knative.dev/v1',
            kind: 'Revision',
            metadata: { name: 'shop-00001', annotations: { [PROXY_IMAGE]: 'evil/proxy:1' } },
          },
          fieldManager: 'tenant',
          force: true,
        },
        patchAs(PatchStrategy.ServerSideApply),
      ),
    ),
    replace: await (async () => {
      // Read as the admin: Knative's view rules (aggregated into a real editor's) are not installed here.
      const current = (await admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...revisions(ns), name: 'shop-00001' })) as {
        metadata: { annotations?: Record<string, string> };
      };
      current.metadata.annotations = { ...current.metadata.annotations, [PROXY_IMAGE]: 'evil/proxy:1' };
      return refusal(custom.replaceNamespacedCustomObject({ ...revisions(ns), name: 'shop-00001', body: current }));
    })(),
  };
  for (const [how, refused] of Object.entries(attempts)) {
    t.is(refused?.code, 403, how);
    // Removing the hooks annotation is refused by two policies; the apiserver names either one.
    t.regex(refused?.message ?? '', how.includes('hooks annotation') ? REFUSED_EITHER : REFUSED, how);
  }
  const after = (await admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...revisions(ns), name: 'shop-00001' })) as {
    metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  };
  t.deepEqual(after.metadata.annotations, { [HOOKS]: 'scan' }, 'nothing changed');
  t.is(after.metadata.labels.app, 'shop');
});

test('Knative’s controller still keeps the routing labels, the gate its annotations; an unstamped Revision stays the tenant’s', async (t) => {
  await createRevision(ns, 'route-00001', 'scan');
  t.is(
    await patch(knative, ns, 'route-00001', {
      metadata: {
        labels: { 'serving.knative.dev/routingState': 'active' },
        annotations: { 'serving.knative.dev/routingStateModified': 'now' },
      },
    }),
    undefined,
    'Knative',
  );
  t.is(
    await patch(gate, ns, 'route-00001', { metadata: { annotations: { 'prestart.dev/reason': 'waiting for scan' } } }),
    undefined,
    'the gate',
  );
  await createRevision(ns, 'plain-00001');
  t.is(
    await patch(tenant, ns, 'plain-00001', { metadata: { annotations: { [PROXY_IMAGE]: 'own/proxy:1' } } }),
    undefined,
    'no hook was asked',
  );
});

test.serial('control: without prestart-revision-metadata, the tenant sets a mesh proxy image on a stamped Revision', async (t) => {
  await createRevision(ctl, 'shop-00001', 'scan');
  await scopeAwayFromControl(true);
  try {
    await waitFor(async () => !(await policyRefuses(ctl)), { what: `the binding ${BINDING} to leave ${ctl} alone` });
    t.is(await patch(tenant, ctl, 'shop-00001', { metadata: { annotations: { [PROXY_IMAGE]: 'evil/proxy:1' } } }), undefined);
  } finally {
    await scopeAwayFromControl(false);
  }
  await waitFor(() => policyRefuses(ctl), { what: `the binding ${BINDING} back in force in ${ctl}` });
});
