// The gate as real pods (installed from the release, as test/e2e/gate-pods.test.ts does) through
// what a cluster puts it through. The tests run in order, on one cluster:
//   0. the upgrade from the previous release (PREVIOUS_RELEASE of test/integration/release/_previous.ts,
//      built as an image by _previous-image.ts) to this one, as the README's Upgrade section says,
//      with Revisions held mid-flight: still held after it, each run carrying on with the request
//      the previous release made, released once their hook answers;
//   1. `kubectl rollout restart deployment/knative-prestart-gate`,
//   2. an eviction of one gate pod through the Eviction API (a node drain's way): the
//      PodDisruptionBudget lets the first through and refuses a second one (429) while the first
//      pod's replacement is not Ready,
//   3. the leader's pod deleted with `--force --grace-period=0`,
//      each during a burst of 100 Revision creations;
//   4. `knative-prestart uninstall --release-held`, as the README's Uninstall section says.
//
// What a user checks after each burst: no create refused (3: only those in flight to the deleted
// pod, counted and printed, each retried by the creator), every Revision held at its create,
// released exactly once, never before its hook answered, and none lost.
//
// Affordable on 2 cores: the Revisions are created directly, as Knative's Configuration reconciler
// would create them (bar the Configuration label, which needs a real owner). So the test is the
// creator, and retries a refused create itself, as that reconciler does. They carry
// `autoscaling.knative.dev/initial-scale: "0"` (config-autoscaler `allow-zero-initial-scale:
// "true"`): Knative's real reconcilers create each released one's Deployment at zero replicas, and
// no pod of them starts. The hook is the release's built-in secret hook as a pod; the test creates
// a Revision's Secret only once the hook reported, in the PrestartRun, that it waits for it
// (_revision-burst.ts).
// Stand-in: Ingress status only (no networking layer; nothing here goes through an Ingress).
// Needs: root, `build-binaries.sh node knative-serving-images`, `npm run image`.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { kubeRequest, statusMessage } from '@knative-prestart/devcluster/kube-request.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PolicyV1Api,
  type V1Pod,
} from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { REVISIONS, type RevisionObject, RUNS, type RunObject } from '../../api/resources.ts';
import { HOLD_LABEL } from '../../api/types.ts';
import {
  buildRelease,
  createDbCredentialsHook,
  GATE_DEPLOYMENT,
  GATE_NS,
  type GatePodsEnv,
  type Installed,
  installSecretHook,
  removeRelease,
  rolloutStatus,
  startGatePodsEnv,
} from './_gate-pods-setup.ts';
import { type PreviousImage, previousImage } from './_previous-image.ts';
import { type BurstResult, burst, createLikeKnative, type Refusal, trackReleases } from './_revision-burst.ts';

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../../cli/main.ts', import.meta.url));
const COUNT = 100;
const CLIENTS = 4;
/** 100 creates over about 25 s: long enough to span a rollout, an eviction's replacement, a takeover. */
const SPACING_MS = 250;
const DISRUPT_AFTER = 15;
const GATE_PODS = 'app.kubernetes.io/name=knative-prestart-gate';
const NAMESPACES = {
  upgrade: 'upgrade',
  rollout: 'burst-rollout',
  evict: 'burst-evict',
  force: 'burst-force',
  uninstall: 'uninstall',
} as const;

let env: GatePodsEnv | undefined;
let installed: Omit<Installed, 'installSeconds'> | undefined;
let previous: PreviousImage | undefined;
const say = (line: string) => process.stdout.write(`gate-pods-disruption: ${line}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

test.before(async () => {
  env = await startGatePodsEnv({
    progress: say,
    servingConfig: { 'config-autoscaler': { 'allow-zero-initial-scale': 'true' } },
  });
  for (const ns of Object.values(NAMESPACES)) await env.createNamespace(ns);
  // This release's image imported and its release file written; what runs first is the previous release.
  installed = await buildRelease(env);
  const t0 = performance.now();
  previous = await previousImage(installed.image);
  await env.node.importImages([{ archive: previous.archive, ref: previous.ref }]);
  await env.kubectl(['apply', '--server-side', '-f', previous.manifests]);
  await rolloutStatus(env, GATE_DEPLOYMENT);
  say(`previous release ${previous.commit} (${previous.ref}) installed and rolled out in ${seconds(performance.now() - t0)}`);
  await installSecretHook(env, installed, Object.values(NAMESPACES));
  await createDbCredentialsHook(env, '{{revision}}-db', '10s');
});

test.after.always(async () => {
  await env?.stop();
  removeRelease(installed);
});

const api = () => {
  const kc = (env as GatePodsEnv).cluster.kubeConfig;
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    policy: kc.makeApiClient(PolicyV1Api),
    lease: kc.makeApiClient(CoordinationV1Api),
  };
};

/**
 * A Revision as Knative's Configuration reconciler creates it, matched by the hook, kept at zero
 * pods; without the Configuration label, which Knative's webhook accepts only with an owner
 * reference to that Configuration (none exists here).
 */
function revisionBody(namespace: string, name: string): object {
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Revision',
    metadata: {
      name,
      namespace,
      annotations: { 'prestart.dev/database': 'orders', 'autoscaling.knative.dev/initial-scale': '0' },
    },
    spec: { containers: [{ image: env?.node.images.testApp }] },
  };
}

const isReady = (p: V1Pod) =>
  !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

async function gatePods(): Promise<V1Pod[]> {
  return (await api().core.listNamespacedPod({ namespace: GATE_NS, labelSelector: GATE_PODS })).items;
}

/** Two gate replicas Ready again, none of them one of `gone`. */
function twoReadyWithout(gone: string[]): Promise<boolean> {
  return waitFor(async () => (await gatePods()).filter((p) => isReady(p) && !gone.includes(p.metadata?.name ?? '')).length === 2, {
    what: `two gate pods Ready, none of ${gone.join(', ')}`,
    timeoutMs: 120_000,
    intervalMs: 250,
  });
}

async function leaseHolder(): Promise<string> {
  const lease = await api().lease.readNamespacedLease({ name: `${GATE_DEPLOYMENT}-default`, namespace: GATE_NS });
  return lease.spec?.holderIdentity ?? '';
}

/**
 * The burst and what a user checks after it. `allowRefused`: how many refused creates the
 * disruption may cause (0 but for the forced delete).
 */
async function burstChecked(
  t: ExecutionContext,
  namespace: string,
  disrupt: () => Promise<void>,
  allowRefused: number,
): Promise<BurstResult> {
  t.timeout(6 * 60_000);
  const { kc, apps, core, custom } = api();
  const names = Array.from({ length: COUNT }, (_, i) => `app${String(i).padStart(3, '0')}-00001`);
  const tracker = await trackReleases(kc, namespace);
  try {
    const result = await burst({
      kc,
      namespace,
      names,
      clients: CLIENTS,
      spacingMs: SPACING_MS,
      body: (name) => revisionBody(namespace, name),
      disruptAfter: DISRUPT_AFTER,
      disrupt,
    });
    const allReleasedAt = await tracker.waitAllReleased(names, 4 * 60_000);
    const lags = names.map((n) => (tracker.seen.get(n)?.firstUnheldAt ?? 0) - (tracker.secretSentAt.get(n) ?? 0)).sort((a, b) => a - b);
    const figures = {
      revisions: COUNT,
      burst: seconds(result.endedAt - result.startedAt),
      disruption: seconds(result.disruption.endedAt - result.disruption.startedAt),
      createsAnsweredDuringDisruption: result.answeredDuringDisruption,
      refusedCreates: result.refused.length,
      allReleasedAfterBurstStart: seconds(allReleasedAt - result.startedAt),
      releaseAfterSecretMedian: seconds(lags[Math.floor(lags.length / 2)] ?? 0),
      releaseAfterSecretMax: seconds(lags.at(-1) ?? 0),
    };
    say(`${namespace}: ${JSON.stringify(figures)}`);
    for (const r of result.refused) {
      say(
        `${namespace}: refused ${r.name} ${seconds(r.at - result.disruption.startedAt)} after the disruption began: ${r.status} ${r.message}`,
      );
    }

    t.true(result.answeredDuringDisruption >= 5, `only ${result.answeredDuringDisruption} creates answered during the disruption`);
    t.true(result.refused.length <= allowRefused, `${result.refused.length} refused creates`);
    t.deepEqual(result.admittedUnheld, [], 'every create admitted held');
    t.deepEqual(tracker.releasedEarly(names), [], 'none released before its hook answered');
    t.deepEqual(
      names.filter((n) => tracker.seen.get(n)?.releases !== 1),
      [],
      'each released exactly once (one held-to-unheld change, never held again)',
    );
    // The gate lifts the hold first and writes the run's Released status after it: wait for that too.
    const listRuns = async () => ((await custom.listNamespacedCustomObject({ ...RUNS, namespace })) as { items: RunObject[] }).items;
    const runs = await waitFor(
      async () => {
        const items = await listRuns();
        return items.length === COUNT && items.every((r) => r.status?.phase === 'Released') ? { items } : undefined;
      },
      { what: `${COUNT} PrestartRuns Released`, timeoutMs: 120_000, intervalMs: 500 },
    ).then(
      (r) => r.items,
      () => listRuns(),
    );
    say(`${namespace}: every PrestartRun Released ${seconds(Date.now() - allReleasedAt)} after the last hold was seen lifted`);
    const unfinished = runs.filter((r) => {
      const hook = r.status?.hooks?.[0];
      return (
        r.status?.phase !== 'Released' ||
        hook?.phase !== 'Succeeded' ||
        !/is ready; bound as env DATABASE_URL/.test(hook.message ?? '') ||
        (hook.answeredAt ?? '9') > (r.status?.releasedAt ?? '')
      );
    });
    t.is(runs.length, COUNT, 'one PrestartRun per Revision');
    t.deepEqual(
      unfinished.map((r) => `${r.metadata?.name}: ${JSON.stringify(r.status)}`),
      [],
      'every run Released by the hook, its answer recorded no later than the release',
    );
    // Knative itself creates each released Revision's Deployment, at zero replicas: no pod starts.
    const deployments = await waitFor(
      async () => {
        const items = (await apps.listNamespacedDeployment({ namespace })).items;
        return items.length === COUNT ? { items } : undefined;
      },
      { what: `Knative's ${COUNT} Deployments in ${namespace}`, timeoutMs: 120_000, intervalMs: 500 },
    );
    t.true(deployments.items.every((d) => d.spec?.replicas === 0 && d.metadata?.labels?.[HOLD_LABEL] === undefined));
    t.is((await core.listNamespacedPod({ namespace })).items.length, 0, 'no pod of the 100 Revisions');
    return result;
  } finally {
    tracker.stop();
  }
}

test.serial(
  'upgrade from the previous release on the pods: Revisions it holds stay held, then are released once, after their hook answered',
  async (t) => {
    if (!env || !installed || !previous) return t.fail('no cluster');
    t.timeout(5 * 60_000);
    const { kc } = api();
    const ns = NAMESPACES.upgrade;
    const before = Array.from({ length: 10 }, (_, i) => `before${i}-00001`);
    const tracker = await trackReleases(kc, ns, { answer: 'later' });
    try {
      for (const name of before) {
        const res = await kubeRequest(kc, 'POST', `/apis/serving.knative.dev/v1/namespaces/${ns}/revisions`, revisionBody(ns, name));
        t.is(res.status, 201, statusMessage(res));
        t.is((res.body as RevisionObject).metadata?.labels?.[HOLD_LABEL], 'true', `${name} held by the previous release`);
      }
      await waitFor(() => before.every((n) => tracker.waiting.has(n)), {
        what: 'the previous gate to ask the secret hook for each, and take its progress',
        timeoutMs: 90_000,
        intervalMs: 250,
      });
      const oldPods = (await gatePods()).map((p) => p.metadata?.name ?? '');
      // The request each run of the previous release made: after the upgrade the run carries on with it.
      const requestOf = async (name: string) => {
        const r = (await api().custom.getNamespacedCustomObject({ ...RUNS, namespace: ns, name })) as RunObject;
        return { uid: r.metadata?.uid, attempt: r.status?.hooks?.[0]?.attempt, requestedAt: r.status?.hooks?.[0]?.requestedAt };
      };
      const requested = await Promise.all(before.map(requestOf));

      const t0 = Date.now();
      await env.kubectl(['apply', '--server-side', '--force-conflicts', '-f', `${installed.releaseDir}/knative-prestart.yaml`]);
      await rolloutStatus(env, GATE_DEPLOYMENT);
      await twoReadyWithout(oldPods);
      say(`upgrade ${previous.commit} -> this release: applied and rolled out in ${seconds(Date.now() - t0)}`);
      const pods = (await gatePods()).filter(isReady);
      t.true(
        pods.every((p) => (p.spec?.containers[0]?.image ?? '').endsWith(installed?.image.digest ?? '-')),
        'the gate runs the new digest',
      );
      t.deepEqual(
        before.filter((n) => tracker.seen.get(n)?.held !== true),
        [],
        'every Revision the previous release held is still held',
      );

      // A Revision created after the upgrade is held by the new gate; then every hook gets its answer.
      const after = 'after-00001';
      // Created as Knative does, retrying a refusal: the previous release's pods stop without a drain,
      // so the apiserver may still reach for one of them for a moment after the rollout; the Revision
      // webhook then fails open and the stamp policy refuses, never admits unheld.
      const refused: Refusal[] = [];
      t.is(await createLikeKnative(kc, ns, after, revisionBody(ns, after), refused), 'held', 'held by the new gate');
      if (refused.length > 0)
        say(`after the upgrade: ${refused.length} refused create(s) of ${after} before it was admitted held: ${refused[0]?.message}`);
      t.deepEqual(
        refused.filter((r) => !/knative-prestart/.test(r.message)),
        [],
        'refused only by knative-prestart (its policy or webhook), each retryable',
      );
      const all = [...before, after];
      await waitFor(() => tracker.waiting.has(after), { what: 'the new gate to ask the hook', timeoutMs: 60_000, intervalMs: 250 });
      const t1 = Date.now();
      await tracker.answer(all);
      const released = await tracker.waitAllReleased(all, 120_000);
      say(`after the upgrade: the ${all.length} Secrets created, all released ${seconds(released - t1)} later`);
      t.deepEqual(tracker.releasedEarly(all), [], 'none released before its hook answered');
      t.deepEqual(
        all.filter((n) => tracker.seen.get(n)?.releases !== 1),
        [],
        'each released exactly once',
      );
      t.deepEqual(
        await Promise.all(before.map(requestOf)),
        requested,
        'each run of the previous release carried on: same run, attempt and request',
      );
    } finally {
      tracker.stop();
    }
  },
);

test.serial(`rollout restart of the gate during ${COUNT} Revision creations: 0 refused, 0 early, 0 lost`, async (t) => {
  if (!env) return t.fail('no cluster');
  const e = env;
  let before: string[] = [];
  await burstChecked(
    t,
    NAMESPACES.rollout,
    async () => {
      before = (await gatePods()).map((p) => p.metadata?.name ?? '');
      const t0 = Date.now();
      await e.kubectl(['-n', GATE_NS, 'rollout', 'restart', `deployment/${GATE_DEPLOYMENT}`]);
      await rolloutStatus(e, GATE_DEPLOYMENT);
      await twoReadyWithout(before);
      say(`rollout restart: both replicas replaced and Ready ${seconds(Date.now() - t0)} after the restart`);
    },
    0,
  );
  // The old pods drain (they serve until no request came for 5 s, at most 20 s), then are gone.
  await waitFor(async () => (await gatePods()).every((p) => !before.includes(p.metadata?.name ?? '')), {
    what: `every pod replaced: none of ${before.join(', ')} left`,
    timeoutMs: 60_000,
    intervalMs: 500,
  });
});

test.serial(
  `an eviction during ${COUNT} Revision creations: the PDB refuses a second one (429) until the replacement is Ready`,
  async (t) => {
    if (!env) return t.fail('no cluster');
    const evict = (pod: string) =>
      kubeRequest(api().kc, 'POST', `/api/v1/namespaces/${GATE_NS}/pods/${pod}/eviction`, {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name: pod, namespace: GATE_NS },
      });
    const seen: { first?: number; second?: number; secondMessage?: string; readyAfterSecond?: string[]; pdbBackMs?: number } = {};
    const pdbAllows = async () =>
      (await api().policy.readNamespacedPodDisruptionBudget({ name: GATE_DEPLOYMENT, namespace: GATE_NS })).status?.disruptionsAllowed ===
      1;
    await waitFor(pdbAllows, { what: 'the PDB to allow one disruption before the burst', timeoutMs: 60_000, intervalMs: 250 });
    await burstChecked(
      t,
      NAMESPACES.evict,
      async () => {
        const [a, b] = (await gatePods()).filter(isReady).map((p) => p.metadata?.name ?? '');
        if (!a || !b) throw new Error('two Ready gate pods expected before the eviction');
        const t0 = Date.now();
        const first = await evict(a);
        if (first.status !== 201) throw new Error(`the first eviction was refused: ${first.status} ${statusMessage(first)}`);
        const second = await evict(b);
        seen.first = first.status;
        seen.second = second.status;
        seen.secondMessage = statusMessage(second);
        // Read after the 429: a replacement not Ready now was not Ready when it was refused.
        seen.readyAfterSecond = (await gatePods()).filter((p) => isReady(p) && p.metadata?.name !== b).map((p) => p.metadata?.name ?? '');
        await twoReadyWithout([a]);
        const recovered = Date.now() - t0;
        await waitFor(pdbAllows, { what: 'the PDB to allow one disruption again', timeoutMs: 60_000, intervalMs: 250 });
        seen.pdbBackMs = Date.now() - t0;
        say(
          `eviction of ${a}: ${first.status}; of ${b} right after: ${second.status} (${seen.secondMessage}); replacement Ready ${seconds(recovered)} after the eviction, the PDB allowing one again after ${seconds(seen.pdbBackMs)}`,
        );
      },
      0,
    );
    t.is(seen.first, 201, 'the PDB lets the first eviction through');
    t.is(seen.second, 429, 'the PDB refuses the second while the replacement is not Ready');
    t.regex(seen.secondMessage ?? '', /disruption budget/);
    t.deepEqual(seen.readyAfterSecond, [], 'no replacement Ready when the second eviction was refused');
  },
);

test.serial(
  `the leader force-deleted during ${COUNT} Revision creations: refused only what was in flight to it, each retried, held and released`,
  async (t) => {
    if (!env) return t.fail('no cluster');
    const e = env;
    let deletedAt = 0;
    const result = await burstChecked(
      t,
      NAMESPACES.force,
      async () => {
        const holder = await leaseHolder();
        const leader = (await gatePods()).find((p) => holder.startsWith(`${p.metadata?.name}-`))?.metadata?.name;
        if (!leader) throw new Error(`no gate pod holds the lease (${holder})`);
        deletedAt = Date.now();
        await e.kubectl(['-n', GATE_NS, 'delete', 'pod', leader, '--force', '--grace-period=0']);
        const newLeader = await waitFor(
          async () => {
            const holder = await leaseHolder();
            return holder !== '' && !holder.startsWith(`${leader}-`) ? holder : undefined;
          },
          {
            what: 'another gate pod to take the lease',
            timeoutMs: 60_000,
            intervalMs: 250,
          },
        );
        const takeover = Date.now() - deletedAt;
        await twoReadyWithout([leader]);
        say(
          `leader ${leader} force-deleted: ${newLeader} leads ${seconds(takeover)} later (lease 15 s), two replicas Ready again after ${seconds(Date.now() - deletedAt)}`,
        );
      },
      // One call in flight per client, and one more each sent before the Service dropped the pod.
      2 * CLIENTS,
    );
    say(`forced delete: ${result.refused.length} refused creates, each retried by the creator until admitted held`);
    for (const r of result.refused) t.true(r.at >= deletedAt, `${r.name} refused before the delete: ${r.message}`);
  },
);

test.serial(
  'uninstall --release-held on the pods: the held Revisions released, new ones unheld, nothing of knative-prestart left',
  async (t) => {
    if (!env) return t.fail('no cluster');
    t.timeout(5 * 60_000);
    const { kc, apps, core, custom } = api();
    const ns = NAMESPACES.uninstall;
    const held = ['held-a-00001', 'held-b-00001'];
    for (const name of held) {
      const res = await kubeRequest(kc, 'POST', `/apis/serving.knative.dev/v1/namespaces/${ns}/revisions`, revisionBody(ns, name));
      t.is(res.status, 201, statusMessage(res));
    }
    for (const name of held) {
      await waitFor(
        async () => {
          const r = (await custom.getNamespacedCustomObject({ ...RUNS, namespace: ns, name })) as RunObject;
          return (r.status?.hooks?.[0]?.message ?? '').includes('does not exist yet');
        },
        { what: `the secret hook waiting for ${name}'s Secret`, timeoutMs: 60_000, intervalMs: 250 },
      );
    }
    const uninstall = async (...flags: string[]) =>
      (
        await run(process.execPath, ['--import', 'tsx', cli, 'uninstall', '--kubeconfig', env?.cluster.kubeconfigPath ?? '', ...flags], {
          timeout: 240_000,
        })
      ).stdout;
    // Every Revision still held anywhere (an earlier test that failed may have left some): the
    // uninstall releases them all.
    const heldEverywhere = (
      (await custom.listClusterCustomObject({ ...REVISIONS, labelSelector: `${HOLD_LABEL}=true` })) as { items: RevisionObject[] }
    ).items.length;
    t.true(heldEverywhere >= held.length);
    const plan = await uninstall('--release-held');
    t.regex(plan, /Nothing was changed/);
    t.is((await gatePods()).filter(isReady).length, 2, 'the plan changes nothing');
    const t0 = Date.now();
    const done = await uninstall('--release-held', '--yes');
    say(`uninstall --release-held --yes took ${seconds(Date.now() - t0)}:\n${done.trim()}`);
    t.regex(done, /knative-prestart is uninstalled\./);
    t.regex(done, new RegExp(`release ${heldEverywhere} held Revision`));
    for (const name of held) t.true(done.includes(`${ns}/${name}`), `${name} in the uninstall's list`);

    // The gate's pods stopped by the kubelet, its namespace, webhooks and CRDs gone.
    await waitFor(
      () =>
        core.readNamespace({ name: GATE_NS }).then(
          () => false,
          (err: { code?: number }) => err.code === 404,
        ),
      { what: 'namespace knative-prestart gone', timeoutMs: 120_000, intervalMs: 500 },
    );
    const partOf = 'app.kubernetes.io/part-of=knative-prestart';
    t.deepEqual((await kc.makeApiClient(AdmissionregistrationV1Api).listMutatingWebhookConfiguration({ labelSelector: partOf })).items, []);
    t.deepEqual((await kc.makeApiClient(ApiextensionsV1Api).listCustomResourceDefinition({ labelSelector: partOf })).items, []);
    t.deepEqual(
      (await core.listPodForAllNamespaces({ labelSelector: partOf })).items.map((p) => p.metadata?.name),
      [],
      'no pod of knative-prestart left on the node',
    );

    // Released, and Knative creates their Deployments; a new Revision the hook would have matched starts unheld.
    const fresh = await kubeRequest(kc, 'POST', `/apis/serving.knative.dev/v1/namespaces/${ns}/revisions`, revisionBody(ns, 'after-00001'));
    t.is(fresh.status, 201, statusMessage(fresh));
    t.is((fresh.body as RevisionObject).metadata?.labels?.[HOLD_LABEL], undefined, 'created unheld');
    for (const name of [...held, 'after-00001']) {
      const rev = (await custom.getNamespacedCustomObject({ ...REVISIONS, namespace: ns, name })) as RevisionObject;
      t.is(rev.metadata?.labels?.[HOLD_LABEL], undefined, `${name} not held`);
      t.deepEqual(rev.metadata?.finalizers ?? [], [], `${name} has no finalizer left`);
      await waitFor(() => apps.readNamespacedDeployment({ name: `${name}-deployment`, namespace: ns }), {
        what: `Knative's Deployment of ${name}`,
        timeoutMs: 60_000,
        intervalMs: 250,
      });
    }
  },
);
