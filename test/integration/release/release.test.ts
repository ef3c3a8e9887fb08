// The release files (`npm run release`) applied as an admin applies them, with kubectl, to a fresh
// real cluster: every object is accepted (CRD schemas, CEL of the policies, RBAC, the webhook
// configuration, workloads under the namespace's restricted Pod Security), the workloads become
// available (on kwok's nodes), and `kubectl apply -k` on the same directory applies them again.

import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AppsV1Api, type V1Deployment, type V1PodDisruptionBudget } from '@kubernetes/client-node';
import test from 'ava';
import { freshCluster, type Installed, kubectlName } from './_support.ts';

// The cluster pulls nothing (kwok runs no containers): any digest reference does.
const IMAGE = `registry.example.com/knative-prestart@sha256:${'ab'.repeat(32)}`;
const GATE = 'knative-prestart.yaml';
const HOOKS = 'knative-prestart-hooks.yaml';
const STAMP = 'knative-prestart-apiserver-stamp.yaml';
let installed: Installed;

test.before(async () => {
  installed = await freshCluster(IMAGE);
});

test.after.always(async () => {
  await installed?.stop();
});

/** The names kubectl reports with one of `verbs`, one line each. */
function reported(stdout: string, ...verbs: string[]): string[] {
  return stdout
    .split('\n')
    .map((l) => /^(\S+) (\S+)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && verbs.includes(m[2] ?? ''))
    .map((m) => m[1] ?? '');
}

const names = (file: string) => (installed.objects[file] ?? []).map(kubectlName);

test.serial('kubectl apply --server-side -f accepts every object of the release files', async (t) => {
  const { releaseDir } = installed;
  const { stdout } = await installed.kubectl(
    ...['apply', '--server-side', '-f', `${releaseDir}/${GATE}`, '-f', `${releaseDir}/${HOOKS}`, '-f', `${releaseDir}/${STAMP}`],
  );
  const expected = [...names(GATE), ...names(HOOKS), ...names(STAMP)];
  t.true(expected.length > 30, `the files hold the whole install (${expected.length} objects)`);
  t.is(names(STAMP).length, 4, 'the apiserver stamp: two MutatingAdmissionPolicies and their bindings');
  t.deepEqual(reported(stdout, 'serverside-applied'), expected);
});

test.serial('the gate and the built-in hooks become available; the PodDisruptionBudget covers the gate', async (t) => {
  const apps = installed.cluster.kubeConfig.makeApiClient(AppsV1Api);
  const deployments = [...(installed.objects[GATE] ?? []), ...(installed.objects[HOOKS] ?? [])].filter((o) => o.kind === 'Deployment');
  t.deepEqual(
    deployments.map((d) => d.metadata?.name),
    ['knative-prestart-gate', 'prestart-hook-job', 'prestart-hook-secret', 'prestart-hook-approval'],
  );
  for (const d of deployments as V1Deployment[]) {
    const name = d.metadata?.name ?? '';
    t.is(d.spec?.template.spec?.containers[0]?.image, IMAGE, `${name} runs the image by digest`);
    // Pods that break the namespace's restricted Pod Security are refused: the Deployment never becomes available.
    const live = await waitFor(
      async () => {
        const dep = await apps.readNamespacedDeployment({ name, namespace: 'knative-prestart' });
        return (dep.status?.availableReplicas ?? 0) === dep.spec?.replicas ? dep : undefined;
      },
      { timeoutMs: 60_000, what: `Deployment ${name} to be available` },
    );
    t.is(live.status?.availableReplicas, name === 'knative-prestart-gate' ? 2 : 1);
  }
  const pdb = installed.objects[GATE]?.find((o) => o.kind === 'PodDisruptionBudget') as V1PodDisruptionBudget | undefined;
  const gate = deployments[0] as V1Deployment;
  t.is(pdb?.spec?.minAvailable, 1);
  t.like(gate.spec?.template.metadata?.labels, pdb?.spec?.selector?.matchLabels ?? { missing: 'selector' });
});

test.serial('kubectl apply -k applies the gate from the kustomization, server-side and client-side', async (t) => {
  const serverSide = await installed.kubectl('apply', '--server-side', '-k', installed.releaseDir);
  t.deepEqual(reported(serverSide.stdout, 'serverside-applied').sort(), names(GATE).sort());
  // Plain `kubectl apply` (client-side) over server-side applied objects: kubectl adopts them.
  const clientSide = await installed.kubectl('apply', '-k', installed.releaseDir);
  t.deepEqual(reported(clientSide.stdout, 'configured', 'unchanged').sort(), names(GATE).sort());
});
