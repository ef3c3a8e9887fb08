// Proof that the local control plane behaves like a real cluster for what the gate relies on:
// controllers create ReplicaSets and pods, the scheduler binds them to a kwok node where they
// become Ready, a ValidatingAdmissionPolicy denies with its message, the apiserver calls a
// mutating webhook served by this test process, Job pods complete, RBAC decides for a minted user.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  AdmissionregistrationV1Api,
  ApiException,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1Deployment,
} from '@kubernetes/client-node';
import test from 'ava';
import { applyManifests } from '../../apply.ts';
import type { Cluster } from '../../control-plane.ts';
import { startHttpsServer } from '../../https-server.ts';
import { sharedCluster } from '../../shared.ts';
import { waitFor } from '../../wait.ts';

const suffix = randomBytes(3).toString('hex');
const ns = `proof-${suffix}`;
let cluster: Cluster;
let core: CoreV1Api;
let apps: AppsV1Api;
const cleanups: (() => Promise<unknown>)[] = [];

test.before(async () => {
  cluster = await sharedCluster();
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  cleanups.push(() => core.deleteNamespace({ name: ns }));
});

test.after.always(async () => {
  await Promise.allSettled(cleanups.map((fn) => fn()));
});

function statusMessage(err: unknown): string {
  if (!(err instanceof ApiException)) return err instanceof Error ? err.message : String(err);
  const body: unknown = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
  const message = (body as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : String(err.body);
}

function deployment(name: string, replicas: number, labels: Record<string, string> = {}): V1Deployment {
  return {
    metadata: { name, namespace: ns, labels },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      },
    },
  };
}

test('a Deployment gets a ReplicaSet and Ready pods on a kwok node, and its deletion collects them', async (t) => {
  await apps.createNamespacedDeployment({ namespace: ns, body: deployment('web', 2) });

  const rs = await waitFor(async () => (await apps.listNamespacedReplicaSet({ namespace: ns, labelSelector: 'app=web' })).items[0], {
    what: 'the ReplicaSet of Deployment web',
  });
  t.is(rs.metadata?.ownerReferences?.[0]?.kind, 'Deployment');
  t.is(rs.metadata?.ownerReferences?.[0]?.name, 'web');

  const pods = await waitFor(
    async () => {
      const list = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' })).items;
      const ready = list.filter(
        (p) => p.status?.phase === 'Running' && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      return ready.length === 2 && ready;
    },
    { what: '2 pods of Deployment web Running and Ready' },
  );
  for (const pod of pods) {
    t.regex(pod.spec?.nodeName ?? '', /^kwok-node-/);
    t.is(pod.metadata?.ownerReferences?.[0]?.name, rs.metadata?.name);
    t.truthy(pod.status?.podIP);
  }
  const ready = await waitFor(
    async () => {
      const d = await apps.readNamespacedDeployment({ name: 'web', namespace: ns });
      return d.status?.readyReplicas === 2 && d;
    },
    { what: 'Deployment web reporting 2 ready replicas' },
  );
  t.is(ready.status?.availableReplicas, 2);

  await apps.deleteNamespacedDeployment({ name: 'web', namespace: ns, propagationPolicy: 'Background' });
  await waitFor(async () => (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' })).items.length === 0, {
    what: 'the garbage collector removing the pods of deleted Deployment web',
  });
  t.is((await apps.listNamespacedReplicaSet({ namespace: ns, labelSelector: 'app=web' })).items.length, 0);
});

test('a ValidatingAdmissionPolicy denies a Deployment carrying a label, with its message', async (t) => {
  const name = `proof-deny-${suffix}`;
  const message = 'Deployments labelled proof.prestart.dev/deny=true may not be created';
  await applyManifests(
    cluster.kubeConfig,
    `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ${name}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [apps]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [deployments]
  validations:
    - expression: "!has(object.metadata.labels) || !('proof.prestart.dev/deny' in object.metadata.labels) || object.metadata.labels['proof.prestart.dev/deny'] != 'true'"
      message: "${message}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: ${name}
spec:
  policyName: ${name}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: ${ns}
`,
  );
  const admission = cluster.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  cleanups.push(
    () => admission.deleteValidatingAdmissionPolicyBinding({ name }),
    () => admission.deleteValidatingAdmissionPolicy({ name }),
  );

  // The apiserver compiles and loads a new policy asynchronously: probe with dry runs until it bites.
  const denial = await waitFor(
    async () => {
      try {
        await apps.createNamespacedDeployment({
          namespace: ns,
          body: deployment('held', 1, { 'proof.prestart.dev/deny': 'true' }),
          dryRun: 'All',
        });
        return undefined;
      } catch (err) {
        if (err instanceof ApiException) return err;
        throw err;
      }
    },
    { what: `ValidatingAdmissionPolicy ${name} denying a labelled Deployment` },
  );
  t.is(denial.code, 422);
  t.true(
    statusMessage(denial).includes(`ValidatingAdmissionPolicy '${name}' with binding '${name}' denied request: ${message}`),
    statusMessage(denial),
  );

  const allowed = await apps.createNamespacedDeployment({
    namespace: ns,
    body: deployment('free', 1, { 'proof.prestart.dev/deny': 'false' }),
  });
  t.is(allowed.metadata?.name, 'free');
});

interface AdmissionReview {
  request: { uid: string; userInfo: { username: string }; object: { metadata: { name: string } } };
}

test('a mutating webhook served by the test process adds a label to a created ConfigMap', async (t) => {
  const seen: AdmissionReview['request'][] = [];
  const server = await startHttpsServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const review = JSON.parse(body) as AdmissionReview;
      seen.push(review.request);
      const patch = [{ op: 'add', path: '/metadata/labels/proof.prestart.dev~1mutated', value: 'by-webhook' }];
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: {
            uid: review.request.uid,
            allowed: true,
            patchType: 'JSONPatch',
            patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
          },
        }),
      );
    });
  });
  cleanups.push(() => server.close());

  const name = `proof-mutate-${suffix}`;
  const admission = cluster.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: [
        {
          name: 'mutate.proof.prestart.dev',
          clientConfig: { url: `${server.url}/mutate`, caBundle: server.caBundle },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
          // Only the ConfigMaps of this test: kube-root-ca.crt and others pass untouched.
          objectSelector: { matchLabels: { 'proof.prestart.dev/mutate': 'yes' } },
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          timeoutSeconds: 5,
        },
      ],
    },
  });
  cleanups.unshift(() => admission.deleteMutatingWebhookConfiguration({ name }));

  const body = { metadata: { name: 'settings', namespace: ns, labels: { 'proof.prestart.dev/mutate': 'yes' } }, data: { a: '1' } };
  await waitFor(
    async () =>
      (await core.createNamespacedConfigMap({ namespace: ns, body, dryRun: 'All' })).metadata?.labels?.['proof.prestart.dev/mutated'],
    { what: `MutatingWebhookConfiguration ${name} in effect` },
  );
  await core.createNamespacedConfigMap({ namespace: ns, body });
  const stored = await core.readNamespacedConfigMap({ name: 'settings', namespace: ns });
  t.is(stored.metadata?.labels?.['proof.prestart.dev/mutated'], 'by-webhook');
  t.is(stored.data?.a, '1');
  const call = seen.filter((r) => r.object.metadata.name === 'settings').pop();
  t.is(call?.userInfo.username, 'admin');
});

test("a Job's pod completes on the kwok node and the Job reports success", async (t) => {
  const batch = cluster.kubeConfig.makeApiClient(BatchV1Api);
  await batch.createNamespacedJob({
    namespace: ns,
    body: {
      metadata: { name: 'migrate' },
      spec: {
        backoffLimit: 0,
        template: { spec: { restartPolicy: 'Never', containers: [{ name: 'migrate', image: 'registry.invalid/migrate:1' }] } },
      },
    },
  });
  const pod = await waitFor(
    async () =>
      (await core.listNamespacedPod({ namespace: ns, labelSelector: 'job-name=migrate' })).items.find(
        (p) => p.status?.phase === 'Succeeded',
      ),
    { what: 'the pod of Job migrate Succeeded' },
  );
  t.regex(pod.spec?.nodeName ?? '', /^kwok-node-/);
  const job = await waitFor(
    async () => {
      const j = await batch.readNamespacedJob({ name: 'migrate', namespace: ns });
      return j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') && j;
    },
    { what: 'Job migrate Complete' },
  );
  t.is(job.status?.succeeded, 1);
});

test('a minted user is authenticated by its client certificate and authorized by RBAC alone', async (t) => {
  const user = `tenant-${suffix}`;
  const tenant = new KubeConfig();
  tenant.loadFromFile(await cluster.mintUserKubeconfig(user, ['tenants']));
  const tenantCore = tenant.makeApiClient(CoreV1Api);

  const denied = await t.throwsAsync(() => tenantCore.listNamespacedPod({ namespace: ns }), { instanceOf: ApiException });
  t.is((denied as ApiException<unknown>).code, 403);
  t.true(statusMessage(denied).includes(`User "${user}" cannot list resource "pods"`), statusMessage(denied));

  const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'tenants-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'tenants' }],
    },
  });
  const pods = await waitFor(() => tenantCore.listNamespacedPod({ namespace: ns }), {
    what: `${user} allowed to list pods through group tenants`,
  });
  t.true(Array.isArray(pods.items));
});
