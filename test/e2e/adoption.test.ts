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
//
// Then issue 20's attacks, each with a control where it proves the policy is what stops it:
// - R1: `<revision>-deployment` controlled by the held Revision's uid under a foreign apiVersion
//   or another kind, no hash label, and prestart.dev/hold "false" (or "", or "TRUE"): Knative
//   compares the uid only and, updating, keeps the tenant's label (mergeMetadata). Refused at
//   create; with the policies unbound for that create, Knative takes it over while held.
// - R2: a tenant writing revisions/status (containerStatuses[].imageDigest, which Knative runs)
//   or configurations/status: refused by prestart-knative-status; unbound, Knative's Deployment
//   runs the tenant's digest.
// - R3: on a released Revision's Deployment, removing the controller ownerReference and hash
//   label while changing the image, in one update or in two: refused.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { cacheDir, pinnedVersions } from '@knative-prestart/devcluster/binaries.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { condition, Knative, type KnativeObject, waitForRevision } from '@knative-prestart/devcluster/knative-client.ts';
import { KNATIVE_NAMESPACE, type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AdmissionregistrationV1Api,
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Deployment,
} from '@kubernetes/client-node';
import test from 'ava';
import { refusal } from '../support/refusal.ts';

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

// Issue 20.

const TENANT_DIGEST = `dev.local/unscanned@sha256:${'e'.repeat(64)}`;
const SERVING = { group: 'serving.knative.dev', version: 'v1' };
const patchAs = (strategy: string) => setHeaderOptions('Content-Type', strategy);

/** A Service whose first Revision the scan hook holds (Knative's Deployment refused), and the hook's request for it. */
async function heldService(name: string): Promise<{ held: KnativeObject; request: ReceivedRequest }> {
  await kn.createService(name, { annotations: { scan: 'yes' } });
  const held = await revision(
    `${name}-00001`,
    'held, and Knative’s Deployment refused',
    (r) => isHeld(r) && condition(r, 'ResourcesAvailable')?.reason === 'Deploying',
  );
  const request = await waitFor(() => hook.requests.find((r) => r.data.revision.name === `${name}-00001`), {
    what: `the scan hook’s request for ${name}-00001`,
  });
  return { held, request };
}

/** A Service whose first Revision the hook released and Knative made Ready, with Knative's Deployment. */
async function releasedService(name: string): Promise<{ rev: KnativeObject; deployment: V1Deployment }> {
  const { request } = await heldService(name);
  const response = await asyncReply(request, 'succeeded', { message: 'scanned' });
  if (!response.ok) throw new Error(`the sink refused the reply (HTTP ${response.status})`);
  const rev = await revision(`${name}-00001`, 'Ready=True', (r) => !isHeld(r) && condition(r, 'Ready')?.status === 'True', 60_000);
  const deployment = await env.apps.readNamespacedDeployment({ name: `${name}-00001-deployment`, namespace: env.namespace });
  return { rev, deployment };
}

/** R1's Deployment: `<revision>-deployment` controlled by the Revision's uid under `owner`, pods of the tenant's own labels. */
function foreignDeployment(rev: KnativeObject, owner: { apiVersion: string; kind: string }, labels: Record<string, string>): V1Deployment {
  const name = rev.metadata?.name ?? '';
  // A selector on a label outside knative.dev/: Knative's update keeps it on the pods (mergeMetadata).
  const pods = { 'tenant-pods': name };
  return {
    metadata: {
      name: `${name}-deployment`,
      labels,
      ownerReferences: [{ ...owner, name, uid: rev.metadata?.uid ?? '', controller: true }],
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: pods },
      template: { metadata: { labels: pods }, spec: { containers: [{ name: 'user-container', image: 'dev.local/unscanned:v1' }] } },
    },
  };
}

const podAutoscaler = (name: string) =>
  env.admin
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject({
      group: 'autoscaling.internal.knative.dev',
      version: 'v1alpha1',
      plural: 'podautoscalers',
      namespace: env.namespace,
      name,
    })
    .then(
      () => true,
      (err: unknown) => (err instanceof ApiException && err.code === 404 ? false : Promise.reject(err)),
    );

const deploymentExists = (name: string) =>
  env.apps.readNamespacedDeployment({ name, namespace: env.namespace }).then(
    () => true,
    (err: unknown) => (err instanceof ApiException && err.code === 404 ? false : Promise.reject(err)),
  );

/** How often Knative's revision reconciler has logged a reconcile of `name` (its JSON lines name the key). */
async function reconciles(name: string): Promise<number> {
  return (await readFile(serving.controllerLog, 'utf8'))
    .split('\n')
    .filter(
      (l) =>
        l.includes(`"knative.dev/key":"${env.namespace}/${name}"`) && l.includes('serving.knative.dev.Revision') && l.includes('Reconcile'),
    ).length;
}

/**
 * Wakes Knative for Revision `name` (a label it copies, written as the admin: a tenant may not
 * change a stamped Revision's labels) and waits until it reconciled it.
 */
async function pokeAndWait(name: string, value: string): Promise<void> {
  const before = await reconciles(name);
  await env.admin
    .makeApiClient(CustomObjectsApi)
    .patchNamespacedCustomObject(
      { ...SERVING, plural: 'revisions', namespace: env.namespace, name, body: { metadata: { labels: { poke: value } } } },
      patchAs(PatchStrategy.MergePatch),
    );
  await waitFor(async () => (await reconciles(name)) > before || undefined, {
    timeoutMs: 60_000,
    what: `Knative to reconcile Revision ${name} again (${serving.controllerLog})`,
  });
}

/** Whether the apiserver refuses the tenant a hold label on a Deployment of their own now (a dry run). */
const holdPolicyRefuses = () => {
  const pods = { app: 'hold-probe' };
  const body: V1Deployment = {
    metadata: { name: 'hold-probe', labels: { 'prestart.dev/hold': 'false' } },
    spec: {
      selector: { matchLabels: pods },
      template: { metadata: { labels: pods }, spec: { containers: [{ name: 'c', image: 'dev.local/x:v1' }] } },
    },
  };
  return refusal(tenant.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace: env.namespace, dryRun: 'All', body })).then(
    (r) => r?.code === 403,
  );
};

/** A tenant's status write to a Knative object (merge patch of the status subresource, as `kubectl patch --subresource=status`). */
const tenantStatus = (plural: string, name: string, status: object, dryRun?: boolean) =>
  refusal(
    tenant
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObjectStatus(
        { ...SERVING, plural, namespace: env.namespace, name, body: { status }, ...(dryRun ? { dryRun: 'All' } : {}) },
        patchAs(PatchStrategy.MergePatch),
      ),
  );

const userImage = (d: V1Deployment | undefined) => d?.spec?.template.spec?.containers.find((c) => c.name === 'user-container')?.image;

test.serial(
  'R1: a Deployment controlled by the held Revision’s uid under a foreign apiVersion or kind, or with any hold value, is refused; Knative gets nothing',
  async (t) => {
    const { held } = await heldService('foreign');
    const name = 'foreign-00001';
    const apps = tenant.makeApiClient(AppsV1Api);
    const byRevisionPolicy = `${TENANT} may not create Deployment ${name}-deployment for`;
    const attempts: [string, V1Deployment, RegExp][] = [
      [
        'kind Revision under example.com/v1, no hash label, hold "false" (the review’s R1)',
        foreignDeployment(held, { apiVersion: 'example.com/v1', kind: 'Revision' }, { 'prestart.dev/hold': 'false' }),
        // Both policies refuse it; the apiserver names the first it evaluated.
        new RegExp(
          `ValidatingAdmissionPolicy '(prestart-revision-deployments|prestart-hold-deployments)'.*${TENANT} may not create Deployment ${name}-deployment`,
        ),
      ],
      [
        'kind Revision under example.com/v1, no hash label, no hold label',
        foreignDeployment(held, { apiVersion: 'example.com/v1', kind: 'Revision' }, {}),
        new RegExp(
          `ValidatingAdmissionPolicy 'prestart-revision-deployments'.*${byRevisionPolicy} Revision ${name}: only Knative Serving makes a Revision's Deployment`,
        ),
      ],
      [
        'kind Foo with the Revision’s uid',
        foreignDeployment(held, { apiVersion: 'example.com/v1', kind: 'Foo' }, {}),
        new RegExp(
          `ValidatingAdmissionPolicy 'prestart-revision-deployments'.*${byRevisionPolicy} a Revision: only Knative Serving makes a Revision's Deployment`,
        ),
      ],
    ];
    for (const value of ['false', '', 'TRUE']) {
      attempts.push([
        `kind Foo with the Revision’s uid, hold "${value}"`,
        foreignDeployment(held, { apiVersion: 'example.com/v1', kind: 'Foo' }, { 'prestart.dev/hold': value }),
        new RegExp(
          `ValidatingAdmissionPolicy '(prestart-revision-deployments|prestart-hold-deployments)'.*${TENANT} may not create Deployment ${name}-deployment`,
        ),
      ]);
      // Without an owner Knative would refuse it ("not owned"); the label alone is refused anyway.
      const plain = foreignDeployment(held, { apiVersion: 'v1', kind: 'Foo' }, { 'prestart.dev/hold': value });
      delete plain.metadata?.ownerReferences;
      attempts.push([
        `no owner, hold "${value}"`,
        plain,
        new RegExp(
          `ValidatingAdmissionPolicy 'prestart-hold-deployments'.*${TENANT} may not create Deployment ${name}-deployment with the label prestart.dev/hold="${value}": that label, whatever its value`,
        ),
      ]);
    }
    for (const [what, body, expected] of attempts) {
      const refused = await refusal(apps.createNamespacedDeployment({ namespace: env.namespace, body }));
      t.is(refused?.code, 403, what);
      t.regex(refused?.message ?? '', expected, what);
      t.log(`${what}: ${refused?.message}`);
    }

    // Knative looks again (woken by a label change) and finds nothing to take.
    await pokeAndWait(name, '1');
    const still = await kn.revision(name);
    t.true(isHeld(still), 'still held');
    t.not(condition(still, 'Ready')?.status, 'True', 'not Ready');
    t.false(await deploymentExists(`${name}-deployment`), 'no Deployment');
    t.false(await podAutoscaler(name), 'no PodAutoscaler');
  },
);

test.serial(
  'control R1: with the two Deployment policies out of the way of the tenant’s create, Knative takes the foreign-owned Deployment over while held',
  async (t) => {
    const name = 'foreign-00001';
    const held = await kn.revision(name);
    t.true(isHeld(held));
    const hold = join(fileURLToPath(new URL('../../config/', import.meta.url)), '200-hold-policy.yaml');
    const admission = env.admin.makeApiClient(AdmissionregistrationV1Api);
    const rebind = async () => {
      await applyManifests(env.admin, hold);
      await waitFor(async () => (await policyRefuses()) && (await holdPolicyRefuses()), {
        what: 'the Deployment policies to be back in force',
      });
    };
    t.teardown(rebind);
    // The hold policy stays bound for every value but the tenant's "false": Knative keeps
    // retrying its own create of this very Deployment (with "true"), and must not win the race
    // for the name while the tenant's create is let through. Policy 4 is unbound: Knative holds
    // its verb, so it changes nothing for Knative's own writes.
    await admission.deleteValidatingAdmissionPolicyBinding({ name: 'prestart-revision-deployments' });
    await applyManifests(
      env.admin,
      JSON.stringify({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: 'prestart-hold-deployments', labels: { 'app.kubernetes.io/part-of': 'knative-prestart' } },
        spec: {
          policyName: 'prestart-hold-deployments',
          validationActions: ['Deny'],
          matchResources: { objectSelector: { matchExpressions: [{ key: 'prestart.dev/hold', operator: 'NotIn', values: ['false'] }] } },
        },
      }),
    );
    await waitFor(async () => !(await policyRefuses()) && !(await holdPolicyRefuses()), {
      what: 'policy 4 unbound and the hold policy to let "false" through',
    });
    await tenant.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: env.namespace,
      body: foreignDeployment(held as KnativeObject, { apiVersion: 'example.com/v1', kind: 'Revision' }, { 'prestart.dev/hold': 'false' }),
    });
    // Back in force before Knative acts: its own update passes them (it holds the verb, and the
    // label's value stays the tenant's "false"), which is why the create must be refused.
    await rebind();
    await pokeAndWait(name, '2');
    await waitFor(() => podAutoscaler(name), { timeoutMs: 60_000, what: `Knative to create PodAutoscaler ${name} for the held Revision` });
    const taken = await env.apps.readNamespacedDeployment({ name: `${name}-deployment`, namespace: env.namespace });
    t.is(taken.metadata?.labels?.['prestart.dev/hold'], 'false', 'Knative kept the tenant’s hold value over the Revision’s "true"');
    t.is(taken.metadata?.ownerReferences?.[0]?.apiVersion, 'example.com/v1', 'still the foreign owner: Knative compared the uid only');
    t.truthy(taken.metadata?.labels?.[HASH_LABEL], 'Knative updated it to its own spec (hash label set)');
    t.is(userImage(taken), 'dev.local/demo/app:v1', 'pods of the held Revision run before its hooks finished');
    const ready = await revision(name, 'Ready=True while held (taken over)', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
    t.true(isHeld(ready), 'the gate never released it');
  },
);

test.serial(
  'R2: a tenant cannot write the status Knative acts on (revisions/status digest, configurations/status), held or released',
  async (t) => {
    const { rev, deployment } = await releasedService('digest');
    const name = 'digest-00001';
    // Knative resolved the containers (dev.local is a registry it skips: no digest, the spec's
    // image runs); as many statuses as containers, so it will not resolve them again.
    const statuses = (rev.status as { containerStatuses?: { name?: string; imageDigest?: string }[] } | undefined)?.containerStatuses;
    t.is(statuses?.length, 1, 'Knative wrote the Revision’s containerStatuses');
    const made = userImage(deployment);
    t.is(made, 'dev.local/demo/app:v1', 'Knative’s Deployment runs the image of the Revision');
    await kn.updateService('digest', { annotations: { scan: 'yes' }, env: { RELEASE: '2' } });
    // The gate writes its condition on the held Revision's status (its identity holds release).
    await revision(
      'digest-00002',
      'held, with the gate’s condition on its status',
      (r) => isHeld(r) && condition(r, 'PrestartHooksReady') !== undefined,
    );

    const swap = { containerStatuses: [{ name: 'user-container', imageDigest: TENANT_DIGEST }] };
    for (const [plural, target, status, kind] of [
      ['revisions', name, swap, 'Revision'],
      ['revisions', 'digest-00002', swap, 'Revision'],
      ['configurations', 'digest', { latestReadyRevisionName: 'digest-00002' }, 'Configuration'],
      ['routes', 'digest', { traffic: [{ revisionName: 'digest-00002', percent: 100 }] }, 'Route'],
    ] as const) {
      const refused = await tenantStatus(plural, target, status);
      t.is(refused?.code, 403, `${plural}/${target}`);
      t.regex(
        refused?.message ?? '',
        new RegExp(
          `ValidatingAdmissionPolicy 'prestart-knative-status'.*${TENANT} may not write the status of ${kind} ${target} in ${env.namespace}: only Knative Serving's controller \\(and the knative-prestart gate\\) write it`,
        ),
        `${plural}/${target}`,
      );
      t.log(`${plural}/${target}: ${refused?.message}`);
    }
    await pokeAndWait(name, '1');
    t.is(
      userImage(await env.apps.readNamespacedDeployment({ name: `${name}-deployment`, namespace: env.namespace })),
      made,
      'Knative’s Deployment runs what it resolved',
    );
    const after = await kn.revision(name);
    t.is(condition(after, 'Ready')?.status, 'True', 'Knative still writes the released Revision’s status');
  },
);

test.serial('control R2: with prestart-knative-status unbound, the tenant’s status digest is what Knative’s Deployment runs', async (t) => {
  const name = 'digest-00001';
  const hold = join(fileURLToPath(new URL('../../config/', import.meta.url)), '200-hold-policy.yaml');
  const statusPolicyRefuses = async () => (await tenantStatus('revisions', name, { observedGeneration: 1 }, true))?.code === 403;
  t.teardown(async () => {
    await applyManifests(env.admin, hold);
    await waitFor(statusPolicyRefuses, { what: 'the policy prestart-knative-status to be back in force' });
  });
  await env.admin.makeApiClient(AdmissionregistrationV1Api).deleteValidatingAdmissionPolicyBinding({ name: 'prestart-knative-status' });
  await waitFor(async () => !(await statusPolicyRefuses()), { what: 'the unbound policy to stop refusing' });

  t.is(
    await tenantStatus('revisions', name, { containerStatuses: [{ name: 'user-container', imageDigest: TENANT_DIGEST }] }),
    undefined,
    'accepted',
  );
  const swapped = await waitFor(
    async () => {
      const d = await env.apps.readNamespacedDeployment({ name: `${name}-deployment`, namespace: env.namespace });
      return userImage(d) === TENANT_DIGEST ? d : undefined;
    },
    { timeoutMs: 60_000, what: `Knative to update ${name}-deployment to the digest the tenant wrote into the Revision’s status` },
  );
  t.is(userImage(swapped), TENANT_DIGEST, 'the released Revision runs an image its hooks never saw');
});

test.serial(
  'R3: the Deployment Knative made for a released Revision cannot be relinked and changed, in one update or in two',
  async (t) => {
    const { deployment } = await releasedService('relink');
    const name = 'relink-00001-deployment';
    const knativeImage = userImage(deployment);
    const apps = tenant.makeApiClient(AppsV1Api);
    const expected = new RegExp(
      `ValidatingAdmissionPolicy 'prestart-revision-deployments'.*${TENANT} may not change Deployment ${name} of Revision relink-00001: only Knative Serving makes a Revision's Deployment or changes its pods`,
    );
    const image = 'dev.local/unscanned:v2';
    const oneUpdate = await refusal(
      apps.patchNamespacedDeployment(
        {
          name,
          namespace: env.namespace,
          body: [
            { op: 'remove', path: '/metadata/ownerReferences' },
            { op: 'remove', path: `/metadata/labels/${HASH_LABEL.replace('/', '~1')}` },
            { op: 'replace', path: '/spec/template/spec/containers/0/image', value: image },
          ],
        },
        patchAs(PatchStrategy.JsonPatch),
      ),
    );
    t.is(oneUpdate?.code, 403, 'one update: owner and hash label removed, image changed');
    t.regex(oneUpdate?.message ?? '', expected);
    t.log(`one update: ${oneUpdate?.message}`);

    // Two: orphaning without touching the pods is open (the garbage collector orphans so) ...
    t.is(
      await refusal(
        apps.patchNamespacedDeployment(
          { name, namespace: env.namespace, body: { metadata: { ownerReferences: null, labels: { [HASH_LABEL]: null } } } },
          patchAs(PatchStrategy.MergePatch),
        ),
      ),
      undefined,
      'orphaning is allowed',
    );
    // ... and Knative, looking again, no longer calls the Deployment the Revision's.
    await pokeAndWait('relink-00001', '1');
    await revision('relink-00001', 'ResourcesAvailable=False/NotOwned', (r) => condition(r, 'ResourcesAvailable')?.reason === 'NotOwned');
    // The orphan's pods still carry the Revision's labels (its selector is immutable): changing them is refused.
    const twoSteps = await refusal(
      apps.patchNamespacedDeployment(
        { name, namespace: env.namespace, body: { spec: { template: { spec: { containers: [{ name: 'user-container', image }] } } } } },
        patchAs(PatchStrategy.StrategicMergePatch),
      ),
    );
    t.is(twoSteps?.code, 403, 'two updates: the image change after orphaning');
    t.regex(twoSteps?.message ?? '', expected);
    t.log(`second step: ${twoSteps?.message}`);
    t.is(
      userImage(await env.apps.readNamespacedDeployment({ name, namespace: env.namespace })),
      knativeImage,
      'it still runs what Knative made',
    );
  },
);
