// The boundary the gate does not police by default, closed by the optional policy
// examples/revision-pods-policy.yaml: a namespace editor (Kubernetes' own `edit`) makes pods that
// carry a Revision's `serving.knative.dev/revisionUID` label, which Knative's private Service of
// that Revision selects, by a bare Pod, a ReplicaSet, or a label added to a pod of their own. Each
// road is refused with the policy applied, while the Deployment and ReplicaSet controllers still
// make the pods of a Deployment (here an admin's, on the kwok node) that carries the label.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Pod,
  type V1ReplicaSet,
} from '@kubernetes/client-node';
import test from 'ava';
import yaml from 'js-yaml';
import { applyManifests } from '../../../devcluster/apply.ts';
import { installedCluster } from '../../../devcluster/gate/env.ts';
import { waitFor } from '../../../devcluster/wait.ts';
import { refusal } from '../../support/refusal.ts';

const POLICY = new URL('../../../examples/revision-pods-policy.yaml', import.meta.url);
const UID_LABEL = 'serving.knative.dev/revisionUID';
const namespace = `revpods-${Math.random().toString(16).slice(2, 8)}`;
const REVISION_UID = '1b4e28ba-2fa1-11d2-883f-0016d3cca427';

let admin: KubeConfig;
let tenant: KubeConfig;

const pod = (name: string, labels: Record<string, string>): V1Pod => ({
  metadata: { name, labels },
  spec: { containers: [{ name: 'app', image: 'dev.local/unscanned:v1' }] },
});

const replicaSet = (name: string, labels: Record<string, string>): V1ReplicaSet => ({
  metadata: { name },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name, ...labels } }, spec: pod(name, {}).spec },
  },
});

test.before(async () => {
  const cluster = await installedCluster();
  admin = cluster.kubeConfig;
  await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'editor' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-mallory' }],
    },
  });
  tenant = new KubeConfig();
  tenant.loadFromFile(await cluster.mintUserKubeconfig('tenant-mallory', ['system:authenticated']));
  await applyManifests(admin, fileURLToPath(POLICY));
  // A policy takes effect a moment after it is created: probe with a dry run until it refuses.
  await waitFor(
    async () =>
      (
        await refusal(
          tenant
            .makeApiClient(CoreV1Api)
            .createNamespacedPod({ namespace, dryRun: 'All', body: pod('probe', { [UID_LABEL]: REVISION_UID }) }),
        )
      )?.code === 403,
    { what: 'the policy prestart-revision-pods to be in force' },
  );
});

test.after.always(async () => {
  const docs = yaml.loadAll(readFileSync(POLICY, 'utf8')) as Array<{ kind: string; metadata: { name: string } }>;
  const reg = admin?.makeApiClient(AdmissionregistrationV1Api);
  const rbac = admin?.makeApiClient(RbacAuthorizationV1Api);
  for (const d of docs) {
    const name = d.metadata.name;
    if (d.kind === 'ValidatingAdmissionPolicyBinding') await reg?.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    if (d.kind === 'ValidatingAdmissionPolicy') await reg?.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
    if (d.kind === 'ClusterRoleBinding') await rbac?.deleteClusterRoleBinding({ name }).catch(() => undefined);
    if (d.kind === 'ClusterRole') await rbac?.deleteClusterRole({ name }).catch(() => undefined);
  }
  await admin
    ?.makeApiClient(CoreV1Api)
    .deleteNamespace({ name: namespace })
    .catch(() => undefined);
});

test.serial('a namespace editor cannot give pods a Revision’s label: bare Pod, ReplicaSet, or a label added later', async (t) => {
  const core = tenant.makeApiClient(CoreV1Api);
  const bare = await refusal(core.createNamespacedPod({ namespace, body: pod('joiner', { [UID_LABEL]: REVISION_UID }) }));
  t.is(bare?.code, 403);
  t.regex(
    bare?.message ?? '',
    new RegExp(`tenant-mallory may not make Pod joiner carry the label serving.knative.dev/revisionUID=${REVISION_UID}`),
  );

  const rs = await refusal(
    tenant.makeApiClient(AppsV1Api).createNamespacedReplicaSet({ namespace, body: replicaSet('joiners', { [UID_LABEL]: REVISION_UID }) }),
  );
  t.is(rs?.code, 403);
  t.regex(rs?.message ?? '', /may not make ReplicaSet joiners carry the label/);

  // A pod of their own without the label is theirs to make; adding the label to it later is not.
  t.is(await refusal(core.createNamespacedPod({ namespace, body: pod('plain', { app: 'plain' }) })), undefined);
  const relabel = await refusal(
    core.patchNamespacedPod(
      { namespace, name: 'plain', body: { metadata: { labels: { [UID_LABEL]: REVISION_UID } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ),
  );
  t.is(relabel?.code, 403);
  // Server-side apply reaches the same check.
  const applied = await refusal(
    core.patchNamespacedPod(
      {
        namespace,
        name: 'plain',
        fieldManager: 'mallory',
        force: true,
        body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'plain', labels: { [UID_LABEL]: REVISION_UID } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    ),
  );
  t.is(applied?.code, 403);
});

test.serial('the Deployment and ReplicaSet controllers still make the pods of a Deployment that carries the label', async (t) => {
  const labels = { app: 'knative-made', [UID_LABEL]: REVISION_UID };
  // As the admin: in a cluster, Knative's controller makes such a Deployment (the hold policies guard that).
  await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name: 'knative-made' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { [UID_LABEL]: REVISION_UID } },
        template: { metadata: { labels }, spec: pod('x', {}).spec },
      },
    },
  });
  const pods = await waitFor(
    async () => {
      const list = await admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: `${UID_LABEL}=${REVISION_UID}` });
      return list.items.length === 2 ? list.items : undefined;
    },
    { what: 'the two pods the ReplicaSet controller makes' },
  );
  t.is(pods.length, 2);
  t.true(pods.every((p) => p.metadata?.ownerReferences?.[0]?.kind === 'ReplicaSet'));
});
