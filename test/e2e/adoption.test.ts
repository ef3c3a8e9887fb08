// A tenant-made Deployment for Knative to adopt (issue 10, M3), against Knative Serving v0.50.0's
// own controllers. Knative leaves an existing `<revision>-deployment` as it is when it is
// controlled by the Revision (by uid) and its label serving.knative.dev/deployment-hash equals the
// hash Knative computes for the Revision: no update, so the hold label never reaches it, and the
// Revision becomes Ready with its hooks skipped. Here a namespace editor (Kubernetes' `edit`,
// with Knative's and knative-prestart's aggregated rules) deploys a Service whose Revision a hook
// holds, computes that very hash (devcluster/knative-serving/deployment-hash: Knative's
// MakeDeployment over the Revision it can read and Knative's published ConfigMaps), and creates
// the Deployment. The policy prestart-revision-deployments (config/200-hold-policy.yaml) refuses
// it; the Revision stays held and not Ready; the hook's answer then releases it and Knative makes
// its Deployment as usual (its identity holds the policy's verb), with the hash the tenant had
// computed from the released Revision: the attempt was the real one. A control then shows what
// the policy stops: with its binding removed for a moment, Knative adopts the same Deployment and
// reports the held Revision Ready.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AdmissionregistrationV1Api,
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1Deployment,
} from '@kubernetes/client-node';
import test from 'ava';
import { applyManifests } from '../../devcluster/apply.ts';
import { cacheDir, pinnedVersions } from '../../devcluster/binaries.ts';
import { type GateEnv, gateEnv } from '../../devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '../../devcluster/gate/hook-server.ts';
import { asyncReply } from '../../devcluster/gate/replies.ts';
import { isHeld } from '../../devcluster/gate/revisions.ts';
import { condition, Knative, type KnativeObject, waitForRevision } from '../../devcluster/knative-client.ts';
import { KNATIVE_NAMESPACE, type KnativeServing, startKnativeServing } from '../../devcluster/knative-serving.ts';
import { waitFor } from '../../devcluster/wait.ts';

const HASH_LABEL = 'serving.knative.dev/deployment-hash';
const TENANT = 'tenant-eve';

let env: GateEnv;
let serving: KnativeServing;
let hook: HookServer;
let tenant: KubeConfig;
let kn: Knative;

test.before(async () => {
  env = await gateEnv('adopt');
  serving = await startKnativeServing(env.cluster, { progress: (line) => process.stderr.write(`e2e: ${line}\n`) });
  // The namespace editor: Kubernetes' own `edit` role, bound in the namespace.
  await env.admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: 'editor' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
    },
  });
  tenant = new KubeConfig();
  tenant.loadFromFile(await env.cluster.mintUserKubeconfig(TENANT));
  kn = new Knative(tenant, env.namespace);
  // The scan hook accepts each request and answers when the test says (asyncReply).
  hook = await startHookServer(async () => ({ status: 202 }));
  const name = `${env.instance}-scan`;
  await env.createHook(name, { match: env.annotationMatch('scan', 'yes'), delivery: { transport: 'http', url: hook.url } });
  await env.waitUntilStamped(name, { scan: 'yes' });
  await waitFor(policyRefuses, { what: 'the policy prestart-revision-deployments to be in force' });
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
  await serving?.stop();
});

/** Knative's deployment hash for `revision` as it is now (devcluster/knative-serving/deployment-hash). */
async function knativeHash(revision: string): Promise<string> {
  const rev = await tenant.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'revisions',
    namespace: env.namespace,
    name: revision,
  });
  // Knative's ConfigMaps, as published with its release (read here as the admin, for brevity).
  const configMaps = (await env.admin.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: KNATIVE_NAMESPACE })).items;
  const binary = join(cacheDir(), 'bin', `knative-serving-${pinnedVersions().KNATIVE_SERVING_VERSION}`, 'deployment-hash');
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run devcluster/build-binaries.sh knative-serving`);
  return new Promise((resolve, reject) => {
    // Knative's processes run with SYSTEM_NAMESPACE, which its queue-proxy container gets as env.
    const child = execFile(binary, { env: { SYSTEM_NAMESPACE: KNATIVE_NAMESPACE } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${binary}: ${err.message} ${stderr}`)) : resolve(stdout.trim()),
    );
    child.stdin?.end(JSON.stringify({ revision: rev, configMaps }));
  });
}

/** The Deployment Knative would adopt as the Revision's: controlled by it, with its hash, running what the tenant likes. */
function tenantDeployment(rev: KnativeObject, hash: string): V1Deployment {
  const name = rev.metadata?.name ?? '';
  const uid = rev.metadata?.uid ?? '';
  const labels = { 'serving.knative.dev/revision': name, 'serving.knative.dev/revisionUID': uid, app: name };
  return {
    metadata: {
      name: `${name}-deployment`,
      labels: { ...labels, [HASH_LABEL]: hash },
      ownerReferences: [{ apiVersion: 'serving.knative.dev/v1', kind: 'Revision', name, uid, controller: true }],
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: { 'serving.knative.dev/revisionUID': uid } },
      template: { metadata: { labels }, spec: { containers: [{ name: 'user-container', image: 'dev.local/unscanned:v1' }] } },
    },
  };
}

const revision = (name: string, what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 30_000) =>
  waitForRevision(kn, name, what, ok, { timeoutMs, logs: serving.controllerLog });

test.serial(
  'a namespace editor cannot hand Knative a Deployment for the held Revision; Knative still makes its own once released',
  async (t) => {
    await kn.createService('shop', { annotations: { scan: 'yes' } });
    const held = await revision(
      'shop-00001',
      'held, and Knative’s Deployment refused',
      (r) => isHeld(r) && condition(r, 'ResourcesAvailable')?.reason === 'Deploying',
    );
    const request = await waitFor(() => hook.requests.find((r) => r.data.revision.name === 'shop-00001'), {
      what: 'the scan hook’s request',
    });

    const hash = await knativeHash('shop-00001');
    t.log(`Knative's deployment hash of the held Revision shop-00001: ${hash}`);
    const apps = tenant.makeApiClient(AppsV1Api);
    const refused = await apps.createNamespacedDeployment({ namespace: env.namespace, body: tenantDeployment(held, hash) }).then(
      () => undefined,
      (err: unknown) => (err instanceof ApiException ? { code: err.code, body: String(err.body) } : Promise.reject(err)),
    );
    t.is(refused?.code, 403);
    t.regex(refused?.body ?? '', /ValidatingAdmissionPolicy 'prestart-revision-deployments'/);
    t.regex(
      refused?.body ?? '',
      new RegExp(
        `${TENANT} may not create Deployment shop-00001-deployment for Revision shop-00001: only Knative Serving makes a Revision's Deployment`,
      ),
    );

    const still = await kn.revision('shop-00001');
    t.true(isHeld(still), 'still held');
    t.not(condition(still, 'Ready')?.status, 'True', 'not Ready');
    t.is(
      await env.apps.readNamespacedDeployment({ name: 'shop-00001-deployment', namespace: env.namespace }).then(
        () => 'exists',
        () => 'absent',
      ),
      'absent',
      'nothing for Knative to adopt',
    );
    t.is((await kn.service('shop'))?.status?.latestReadyRevisionName, undefined, 'the Service has no Ready Revision');

    // The hook answers: the gate releases, and Knative (its controller's ServiceAccount holds the
    // policy's verb) creates the Deployment it wants.
    const response = await asyncReply(request as ReceivedRequest, 'succeeded', { message: 'scanned' });
    t.true(response.ok, `the sink took the reply (HTTP ${response.status})`);
    await revision('shop-00001', 'Ready=True', (r) => !isHeld(r) && condition(r, 'Ready')?.status === 'True', 60_000);
    const made = await env.apps.readNamespacedDeployment({ name: 'shop-00001-deployment', namespace: env.namespace });
    t.is(made.metadata?.ownerReferences?.find((o) => o.controller)?.uid, held.metadata?.uid, 'Knative’s, controlled by the Revision');
    t.not(made.spec?.template.spec?.containers[0]?.image, 'dev.local/unscanned:v1');
    // The tenant's computation is Knative's: on the released Revision it gives the hash Knative wrote.
    const knativeWrote = await waitFor(
      async () => {
        const [d, computed] = await Promise.all([
          env.apps.readNamespacedDeployment({ name: 'shop-00001-deployment', namespace: env.namespace }),
          knativeHash('shop-00001'),
        ]);
        return d.metadata?.labels?.[HASH_LABEL] === computed ? computed : undefined;
      },
      { what: 'the hash computed for the released Revision to equal the one on Knative’s Deployment' },
    );
    t.log(`Knative's Deployment carries ${HASH_LABEL}=${knativeWrote}, the hash computed for the released Revision`);
  },
);

/** Whether the apiserver refuses the tenant a hash-labelled Deployment now (a dry run). */
const policyRefuses = () =>
  tenant
    .makeApiClient(AppsV1Api)
    .createNamespacedDeployment({
      namespace: env.namespace,
      dryRun: 'All',
      body: tenantDeployment({ metadata: { name: 'probe', uid: 'probe' } }, 'probe'),
    })
    .then(
      () => false,
      (err: unknown) => err instanceof ApiException && err.code === 403,
    );

test.serial('control: with the policy unbound, Knative adopts the same Deployment and reports the held Revision Ready', async (t) => {
  const hold = join(fileURLToPath(new URL('../../config/', import.meta.url)), '200-hold-policy.yaml');
  t.teardown(async () => {
    await applyManifests(env.admin, hold);
    await waitFor(policyRefuses, { what: 'the policy prestart-revision-deployments to be back in force' });
  });
  await kn.updateService('shop', { annotations: { scan: 'yes' }, env: { RELEASE: '2' } });
  const held = await revision(
    'shop-00002',
    'held, and Knative’s Deployment refused',
    (r) => isHeld(r) && condition(r, 'ResourcesAvailable')?.reason === 'Deploying',
  );
  await env.admin
    .makeApiClient(AdmissionregistrationV1Api)
    .deleteValidatingAdmissionPolicyBinding({ name: 'prestart-revision-deployments' });
  await waitFor(async () => !(await policyRefuses()), { what: 'the unbound policy to stop refusing' });

  await tenant
    .makeApiClient(AppsV1Api)
    .createNamespacedDeployment({ namespace: env.namespace, body: tenantDeployment(held, await knativeHash('shop-00002')) });
  const ready = await revision('shop-00002', 'Ready=True while held (adopted)', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
  t.true(isHeld(ready), 'the gate never released it');
  const adopted = await env.apps.readNamespacedDeployment({ name: 'shop-00002-deployment', namespace: env.namespace });
  t.is(adopted.spec?.template.spec?.containers[0]?.image, 'dev.local/unscanned:v1', 'Knative left the tenant’s Deployment as it was');
  const svc = await waitFor(
    async () => {
      const s = await kn.service('shop');
      return s?.status?.latestReadyRevisionName === 'shop-00002' ? s : undefined;
    },
    { what: 'Service shop to take shop-00002 as its latest Ready Revision' },
  );
  t.is(svc.status?.latestReadyRevisionName, 'shop-00002', 'the Service routes to the held Revision: the hooks were skipped');
});
