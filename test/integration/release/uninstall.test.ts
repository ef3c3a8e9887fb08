// `knative-prestart uninstall`, run as an admin runs it (the CLI, a cluster-admin kubeconfig) on a
// fresh real cluster with the release applied with kubectl and the gate running. Both choices for
// held Revisions, one after the other on the same cluster (the second run also shows that the
// release installs again over what --keep-held left):
//   --keep-held: the held Revision stays held (its Deployment is still refused) but can be
//     deleted, and so can its namespace; a new Revision is created unheld and gets its Deployment.
//   --release-held: the held Revision is released (Knative would create its Deployment now); the
//     rest as above, and nothing of knative-prestart is left.
// The gate runs as a CLI process; a stand-in for the kubelet stops it when uninstall scales its
// Deployment to zero (kwok, which runs the Deployment's pods here, runs no containers).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { hookMethods } from '@knative-prestart/devcluster/gate/hooks.ts';
import type { GateProcess } from '@knative-prestart/devcluster/gate/process.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld, revisionMethods } from '@knative-prestart/devcluster/gate/revisions.ts';
import { knativeServingCrdDir } from '@knative-prestart/devcluster/knative.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { gateKubeconfig, replicaPorts, startReplica } from './_gates.ts';
import { freshCluster, type Installed } from './_support.ts';

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../../../cli/main.ts', import.meta.url));
const IMAGE = `registry.example.com/knative-prestart@sha256:${'ef'.repeat(32)}`;
const PART_OF = 'app.kubernetes.io/part-of=knative-prestart';

let installed: Installed;
let hook: HookServer;
let gate: GateProcess | undefined;

test.before(async () => {
  installed = await freshCluster(IMAGE);
  await applyManifests(installed.cluster.kubeConfig, await knativeServingCrdDir());
  // Hooks of the namespace the test is in: `slow` never answers, `check` fails Revisions annotated check=fail.
  hook = await startHookServer(async (req) =>
    req.data.hook.name === 'check' ? syncReply(req, 'failed', { message: 'image scan found 3 critical CVEs' }) : { status: 202 },
  );
});

test.after.always(async () => {
  await gate?.stop();
  await hook?.close();
  await installed?.stop();
});

const api = () => {
  const kc = installed.cluster.kubeConfig;
  return {
    apps: kc.makeApiClient(AppsV1Api),
    core: kc.makeApiClient(CoreV1Api),
    admission: kc.makeApiClient(AdmissionregistrationV1Api),
    crds: kc.makeApiClient(ApiextensionsV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
};

/** The release applied as the README says, the built-in hooks' RoleBinding in `namespace`, the gate started. */
async function install(namespace: string): Promise<void> {
  const { releaseDir } = installed;
  await installed.kubectl(
    'apply',
    '--server-side',
    '-f',
    `${releaseDir}/knative-prestart.yaml`,
    '-f',
    `${releaseDir}/knative-prestart-hooks.yaml`,
  );
  // The apiserver's stamp too (this apiserver serves MutatingAdmissionPolicy v1): uninstall removes it with the webhook.
  await installed.kubectl('apply', '--server-side', '-f', `${releaseDir}/knative-prestart-apiserver-stamp.yaml`);
  await installed.kubectl('create', 'namespace', namespace);
  await installed.kubectl(
    ...['create', 'rolebinding', 'prestart-hook-secret', '-n', namespace, '--clusterrole=knative-prestart-hook-secret-namespace'],
    '--serviceaccount=knative-prestart:prestart-hook-secret',
  );
  gate = await startReplica({ kubeconfigPath: await gateKubeconfig(installed.cluster), ports: await replicaPorts(), leaseSeconds: 3 });
  const hooks = hookMethods(installed.cluster.kubeConfig, namespace);
  await hooks.createHook('slow', { delivery: { transport: 'http', url: hook.url } });
  await hooks.createHook('check', { match: hooks.annotationMatch('check', 'fail'), delivery: { transport: 'http', url: hook.url } });
  await hooks.waitUntilStamped('check', { check: 'fail' });
}

/** Runs the CLI's uninstall as a cluster admin, and prints what it printed. */
async function uninstall(t: ExecutionContext, ...flags: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [
    '--import',
    'tsx',
    cli,
    'uninstall',
    '--kubeconfig',
    installed.cluster.kubeconfigPath,
    ...flags,
  ]);
  t.log(stdout);
  return stdout;
}

/**
 * Uninstalls for real while a stand-in for the kubelet stops the gate process once its Deployment
 * is scaled to zero, as the kubelet stops the pods of a scaled-down Deployment.
 */
async function uninstallForReal(t: ExecutionContext, held: '--keep-held' | '--release-held'): Promise<string> {
  const running = gate;
  const kubelet = waitFor(
    async () =>
      (await api().apps.readNamespacedDeployment({ name: 'knative-prestart-gate', namespace: 'knative-prestart' })).spec?.replicas === 0,
    { timeoutMs: 120_000, what: 'uninstall to scale the gate to zero' },
  ).then(() => running?.stop());
  const out = await uninstall(t, held, '--yes');
  await kubelet;
  gate = undefined;
  return out;
}

async function gone(what: string, read: () => Promise<unknown>): Promise<void> {
  await waitFor(
    () =>
      read().then(
        () => false,
        (err: { code?: number }) => err.code === 404,
      ),
    { timeoutMs: 90_000, what: `${what} to be gone` },
  );
}

async function nothingLeft(t: ExecutionContext, keptPolicies: string[]): Promise<void> {
  const { admission, crds, rbac } = api();
  t.deepEqual((await admission.listMutatingWebhookConfiguration({ labelSelector: PART_OF })).items, []);
  for (const plural of ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings']) {
    const left = (await api()
      .custom.listClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural, labelSelector: PART_OF })
      .then((l) => (l as { items: unknown[] }).items)) as unknown[];
    t.deepEqual(left, [], `no ${plural} left`);
  }
  t.deepEqual((await crds.listCustomResourceDefinition({ labelSelector: PART_OF })).items, []);
  t.deepEqual(
    (await admission.listValidatingAdmissionPolicy({ labelSelector: PART_OF })).items.map((p) => p.metadata?.name).sort(),
    keptPolicies,
  );
  const roles = (await rbac.listClusterRole({ labelSelector: PART_OF })).items.map((r) => r.metadata?.name);
  t.deepEqual(roles.sort(), keptPolicies.length > 0 ? ['knative-prestart-force-release', 'knative-prestart-knative-serving'] : []);
  await gone('namespace knative-prestart', () => api().core.readNamespace({ name: 'knative-prestart' }));
}

test.serial('--keep-held: held Revisions stay held, yet they and their namespace can be deleted; new Revisions start unheld', async (t) => {
  await install('shop');
  const shop = revisionMethods(installed.cluster.kubeConfig, 'shop');
  t.true(isHeld(await shop.createRevision('cart-00001')), 'held for slow');
  await shop.waitForRun('cart-00001', 'requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
  t.true(isHeld(await shop.createRevision('scan-00001', { annotations: { check: 'fail' } })));
  await shop.waitForRun('scan-00001', 'failed', (r) => r.status?.phase === 'Failed');

  const plan = await uninstall(t, '--keep-held');
  t.regex(plan, /Nothing was changed\. Run again with --yes/);
  t.regex(plan, /keep 2 held Revision\(s\) held.*shop\/cart-00001/);
  t.is((await api().admission.listMutatingWebhookConfiguration({ labelSelector: PART_OF })).items.length, 1, 'the plan changes nothing');

  const done = await uninstallForReal(t, '--keep-held');
  t.regex(done, /knative-prestart is uninstalled\./);
  t.regex(done, /rolebinding shop\/prestart-hook-secret/);
  await nothingLeft(t, [
    'prestart-hold-deployments',
    'prestart-knative-status',
    'prestart-protect-revisions',
    'prestart-revision-deployments',
  ]);

  const cart = await shop.getRevision('cart-00001');
  t.true(isHeld(cart), 'still held');
  t.deepEqual(cart.metadata?.finalizers ?? [], [], 'no finalizer left');
  t.like(
    await shop.createDeploymentLikeKnative(cart),
    { created: false, status: 403 },
    'the kept hold policy still refuses its Deployment',
  );
  await installed.kubectl('delete', 'revision', 'cart-00001', '-n', 'shop', '--wait=false');
  await gone('Revision cart-00001', () => shop.getRevision('cart-00001'));
  await installed.kubectl('delete', 'namespace', 'shop', '--wait=false');
  await gone('namespace shop', () => api().core.readNamespace({ name: 'shop' }));

  await installed.kubectl('create', 'namespace', 'after');
  const after = revisionMethods(installed.cluster.kubeConfig, 'after');
  const fresh = await after.createRevision('web-00001', { annotations: { check: 'fail' } });
  t.false(isHeld(fresh), 'not held');
  t.is(fresh.metadata?.annotations?.['prestart.dev/hooks'], undefined, 'not stamped');
  t.deepEqual(await after.createDeploymentLikeKnative(fresh), { created: true });
});

test.serial('--release-held: held Revisions are released, and nothing of knative-prestart is left', async (t) => {
  await install('shop2');
  const shop = revisionMethods(installed.cluster.kubeConfig, 'shop2');
  t.true(isHeld(await shop.createRevision('cart-00001')));
  await shop.waitForRun('cart-00001', 'requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');

  const done = await uninstallForReal(t, '--release-held');
  t.regex(done, /release 1 held Revision\(s\).*shop2\/cart-00001/);
  await nothingLeft(t, []);

  const cart = await shop.getRevision('cart-00001');
  t.false(isHeld(cart), 'released');
  t.deepEqual(cart.metadata?.finalizers ?? [], []);
  t.deepEqual(await shop.createDeploymentLikeKnative(cart), { created: true }, 'Knative may create its Deployment');
  await installed.kubectl('delete', 'namespace', 'shop2', '--wait=false');
  await gone('namespace shop2', () => api().core.readNamespace({ name: 'shop2' }));
  const fresh = await revisionMethods(installed.cluster.kubeConfig, 'after').createRevision('web-00002');
  t.false(isHeld(fresh));
});
