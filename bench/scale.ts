// The gate at scale, end to end, on the real local control plane with kwok (issue 14): Revisions
// shaped and sized as Knative Serving writes them (labels, annotations, owner reference, status,
// managed fields), spread over many namespaces, most of them released long ago with their
// PrestartRuns, some held by many PrestartHooks, and pods of Revisions on kwok's node. The gate
// runs as its compiled CLI in a process of its own, as in production, at info level.
//
// Each figure is printed beside a baseline measured in the same run:
//   1. gate RSS, steady with everything held                 vs the same gate idle at start
//   2. RSS peak while every cache re-lists (the CRDs of Revisions, Routes and PrestartRuns are
//      updated, as an upgrade does, and etcd compacted while the gate is paused: every watch comes
//      back to 410 Gone)
//                                                            vs the steady RSS just before
//   3. restart -> every held run reconciled and its request re-sent (the gate was down past the
//      hooks' resendInterval, so every request is due)       vs the first start, cluster empty
//   4. Revision-create webhook through the apiserver, p99, dry-run creates in a gated namespace
//      (stamped) vs a namespace the webhook does not select, alternating
//   5. 100 concurrent replies -> the hold label gone (a watch sees it), p99
//                                                            vs one label PATCH -> the watch
//                                                            (and vs 100 concurrent PATCHes)
//   6. replies applied per second (202: stored in the run), 16 at a time
//                                                            vs the apiserver's own PrestartRun
//                                                            status writes per second, 16 at a time,
//                                                            in alternating rounds
//   7. a Revision of a healthy hook (synchronous reply) released, create -> hold gone, median,
//      while 1,000 Revisions wait on a hook that accepts connections and never answers (each send
//      costs the transport's whole timeout, like a blackholed address)
//                                                            vs the same before those were created
//
//   npm run bench:scale          (builds, then runs this with --cli dist/cli/main.js)
//   node --import tsx bench/scale.ts --cli dist/cli/main.js [--namespaces 100] [--services 10]
//     [--generations 10] [--hooks 20] [--pods 50000] [--pods-wait 900] [--hang 1000]
//     [--concurrent 100] [--throughput 300] [--samples 15] [--webhook 300] [--settle 30]
//     [--max-minutes 60]
//
// Revisions = namespaces x services x generations; the newest generation of every Service is held
// (one hook each, the hooks taking the Services in turn), the older ones were released.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BulkError, bulkWriter, inParallel } from '@knative-prestart/devcluster/bulk.ts';
import { compactEtcd } from '@knative-prestart/devcluster/etcd-compact.ts';
import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import type { ReceivedRequest } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply, syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { HOLD_LABEL, type PrestartRunStatus } from '../api/types.ts';
import { controlPlaneMemory, histogram, load, meanMsBetween, memoryKiB, summarize, table } from './_common.ts';
import {
  apiPath,
  deploymentEnv,
  deploymentNodeOptions,
  PRESTART,
  podOf,
  revisionOf,
  revisionStatus,
  SERVING,
  writeReleasedRevision,
  writeService,
} from './_knative.ts';
import {
  afterGc,
  type Follower,
  follow,
  heapFileFor,
  resetPeak,
  rssParts,
  type ScaleGate,
  scaleHook,
  spawnScaleGate,
} from './_scale-support.ts';

const { values: a } = parseArgs({
  options: {
    cli: { type: 'string', default: 'dist/cli/main.js' },
    namespaces: { type: 'string', default: '100' },
    services: { type: 'string', default: '10' },
    generations: { type: 'string', default: '10' },
    hooks: { type: 'string', default: '20' },
    pods: { type: 'string', default: '50000' },
    'pods-wait': { type: 'string', default: '900' },
    hang: { type: 'string', default: '1000' },
    concurrent: { type: 'string', default: '100' },
    throughput: { type: 'string', default: '300' },
    samples: { type: 'string', default: '15' },
    webhook: { type: 'string', default: '300' },
    settle: { type: 'string', default: '30' },
    'max-minutes': { type: 'string', default: '60' },
    'gate-log-level': { type: 'string', default: 'info' },
    'node-options': { type: 'string' },
  },
});
const N = {
  namespaces: Number(a.namespaces),
  services: Number(a.services),
  generations: Number(a.generations),
  hooks: Number(a.hooks),
  pods: Number(a.pods),
  podsWaitS: Number(a['pods-wait']),
  hang: Number(a.hang),
  concurrent: Number(a.concurrent),
  throughput: Number(a.throughput),
  samples: Number(a.samples),
  webhook: Number(a.webhook),
  settleS: Number(a.settle),
};
const RESEND_S = 30;
const WRITERS = 32;
const cli = resolve(a.cli as string);
if (!existsSync(cli)) throw new Error(`${a.cli}: no such file (npm run build makes dist/cli/main.js)`);
// The gate runs with the Node options and environment its Deployment gives it (config/500-gate.yaml),
// unless told otherwise (--node-options replaces the Node options only).
const nodeOptions = a['node-options'] ?? deploymentNodeOptions();
const { NODE_OPTIONS: _, ...deployedEnv } = deploymentEnv();

const T0 = performance.now();
const say = (line: string) => console.log(`[${((performance.now() - T0) / 1000).toFixed(0).padStart(4)} s] ${line}`);
const mib = (kib: number) => (kib / 1024).toFixed(1);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pad = (n: number, w = 2) => String(n).padStart(w, '0');

// Bounded: whatever happens, the bench ends (and cleans up) within --max-minutes.
const deadline = setTimeout(() => {
  console.error(`bench/scale: over ${a['max-minutes']} minutes; giving up`);
  void cleanup().finally(() => process.exit(3));
}, Number(a['max-minutes']) * 60_000);
deadline.unref();

say(`scale: ${load()}`);
const env = await gateEnv(`scale-${randomBytes(2).toString('hex')}`, { inProcess: false });
const admin = env.admin;
const custom = admin.makeApiClient(CustomObjectsApi);
const writer = await bulkWriter(admin, WRITERS);
// The baselines write as the gate does, under its identity: the apiserver's priority and fairness
// treats the admin (system:masters) as exempt, the gate's service account not.
const gateKc = new KubeConfig();
gateKc.loadFromFile(env.gateKubeconfigPath);
const asGate = await bulkWriter(gateKc, WRITERS);
const instance = env.instance;
const namespaces = Array.from({ length: N.namespaces }, (_, i) => `${instance}-${pad(i)}`);
const services = Array.from({ length: N.services }, (_, s) => `svc-${pad(s)}`);
const hookNames = Array.from({ length: N.hooks }, (_, h) => `${instance}-h${pad(h)}`);
const HOOK_KEY = 'bench.prestart.dev/hook';
const MARK = 'bench.prestart.dev/mark';
const plainNs = `${instance}-plain`;
const heldKeys: string[] = [];
const made = { configurations: 0, routes: 0, revisions: 0, runs: 0, pods: 0 };
let gate: ScaleGate | undefined;
let revisions: Follower<KubernetesObject> | undefined;
let runs: Follower<KubernetesObject & { status?: PrestartRunStatus }> | undefined;
const hooks = {
  accepting: await scaleHook(() => ({ status: 202 })),
  fast: await scaleHook((req) => syncReply(req, 'succeeded', { message: 'nothing to do' })),
  hanging: await scaleHook(() => undefined),
};
const results: string[][] = [];
/** Replies the sink answered 503 (not recorded now) and the bench sent again, as a hook does. */
let sinkRetries = 0;
const figure = (name: string, measured: string, baseline: string, compare: string, goal: string, met: boolean | undefined) =>
  results.push([name, measured, baseline, compare, goal, met === undefined ? '' : met ? 'yes' : 'NO']);

async function cleanup(): Promise<void> {
  revisions?.stop();
  runs?.stop();
  await gate?.process.stop().catch(() => undefined);
  // Held Revisions carry the gate's finalizer: with the gate gone, the admin lifts it.
  await inParallel(heldKeys.length, WRITERS, async (i) => {
    const [ns, name] = (heldKeys[i] as string).split('/');
    await writer
      .send(
        'PATCH',
        `/apis/serving.knative.dev/v1/namespaces/${ns}/revisions/${name}`,
        { metadata: { finalizers: null } },
        'application/merge-patch+json',
      )
      .catch(() => undefined);
  });
  for (const ns of [...namespaces, plainNs]) await env.core.deleteNamespace({ name: ns }).catch(() => undefined);
  for (const h of Object.values(hooks)) await h.close();
  writer.close();
  asGate.close();
  await env.stop();
  await env.cluster.stop();
}

try {
  // --- setup: namespaces, hooks, the gate idle -------------------------------------------------
  for (const ns of namespaces) {
    await env.core.createNamespace({ body: { metadata: { name: ns, labels: { 'prestart.dev/gate': instance } } } });
  }
  await env.core.createNamespace({ body: { metadata: { name: plainNs } } });
  const gatedNamespaces = { matchLabels: { 'prestart.dev/gate': instance } };
  for (const name of hookNames) {
    await env.createHook(name, {
      match: { annotation: { key: HOOK_KEY, value: name }, namespaceSelector: gatedNamespaces },
      timeout: '1h',
      resendInterval: `${RESEND_S}s`,
      delivery: { transport: 'http', url: hooks.accepting.url },
      params: { database: 'orders', migrate: true },
      contributions: { allowed: ['env', 'volume'] },
    });
  }
  const [webhookPort, sinkPort] = (await freePorts(2)) as [number, number];
  const heapFile = heapFileFor('gate');
  const gateOpts = {
    kubeconfig: env.gateKubeconfigPath,
    instance,
    webhook: webhookPort,
    sink: sinkPort,
    heapFile,
    logLevel: a['gate-log-level'],
    nodeOptions,
    env: deployedEnv,
  };
  say(
    `gate: ${cli} with NODE_OPTIONS="${nodeOptions}" (${a['node-options'] === undefined ? 'as config/500-gate.yaml sets it' : '--node-options'}), ` +
      `${Object.entries(deployedEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')} (as config/500-gate.yaml sets them)`,
  );
  gate = await spawnScaleGate(cli, gateOpts);
  const firstStartS = (gate.readyAt - gate.spawnedAt) / 1000;
  await env.waitUntilStamped(hookNames[0] as string, { [HOOK_KEY]: hookNames[0] as string });
  await pause(10_000);
  const idle = memoryKiB(gate.pid);
  const idleParts = rssParts(gate.pid);
  const idleGc = await afterGc(gate.pid, heapFile);
  say(
    `gate pid ${gate.pid} ready ${firstStartS.toFixed(1)} s after spawn; idle VmRSS ${mib(idle.rss)} MiB (anonymous ${mib(idleParts.anon)}, file-backed ${mib(idleParts.file)}); ` +
      `after a full GC: V8 heap in use ${mib(idleGc.heapUsed)} MiB of ${mib(idleGc.heapTotal)} committed, VmRSS ${mib(idleGc.rss)} MiB`,
  );
  // The history (released Revisions and their runs) is written while no gate runs, and the gate
  // then starts among it, as in a cluster where it has run for a while: runs created by hand exist
  // a moment without status, which a running gate would take for interrupted ones and look at.
  await gate.process.stop();

  // --- setup: pods, Services' objects, old Revisions with their released runs --------------------
  const node = 'kwok-node-0';
  const podsPerNs = Math.ceil(N.pods / N.namespaces);
  const tPods = performance.now();
  await inParallel(
    N.pods,
    WRITERS,
    async (i) => {
      const ns = namespaces[i % N.namespaces] as string;
      const svc = services[Math.floor(i / N.namespaces) % N.services] as string;
      await writer.send('POST', `/api/v1/namespaces/${ns}/pods`, podOf(ns, `${svc}-${pad(N.generations - 1, 5)}`, i, node));
      made.pods++;
    },
    (done) => done % 10_000 === 0 && say(`  ${done} pods`),
  );
  say(`${N.pods} pods (${podsPerNs} per namespace) on ${node} created in ${((performance.now() - tPods) / 1000).toFixed(0)} s`);

  const now = new Date().toISOString();
  const configurationUID = new Map<string, string>();
  await inParallel(N.namespaces * N.services, WRITERS, async (i) => {
    const ns = namespaces[Math.floor(i / N.services)] as string;
    const svc = services[i % N.services] as string;
    configurationUID.set(`${ns}/${svc}`, await writeService(writer, ns, svc, `${svc}-${pad(N.generations - 1, 5)}`, now));
    made.configurations++;
    made.routes++;
  });
  const hookOf = (nsIndex: number, s: number) => hookNames[(nsIndex * N.services + s) % N.hooks] as string;
  const tOld = performance.now();
  const old = N.namespaces * N.services * (N.generations - 1);
  await inParallel(
    old,
    WRITERS,
    async (i) => {
      const nsIndex = Math.floor(i / (N.services * (N.generations - 1)));
      const s = Math.floor(i / (N.generations - 1)) % N.services;
      const gen = (i % (N.generations - 1)) + 1;
      const ns = namespaces[nsIndex] as string;
      const svc = services[s] as string;
      const rev = revisionOf(ns, svc, gen, configurationUID.get(`${ns}/${svc}`));
      await writeReleasedRevision(writer, ns, rev, hookOf(nsIndex, s), hooks.accepting.url, now);
      made.revisions++;
      made.runs++;
    },
    (done) => done % 3000 === 0 && say(`  ${done} released Revisions with their runs`),
  );
  say(
    `${old} released Revisions (status written) with their released PrestartRuns, ${made.routes} Routes and Configurations, in ${((performance.now() - tOld) / 1000).toFixed(0)} s`,
  );

  gate = await spawnScaleGate(cli, gateOpts);
  const historyStartS = (gate.readyAt - gate.spawnedAt) / 1000;
  await env.waitUntilStamped(hookNames[0] as string, { [HOOK_KEY]: hookNames[0] as string });
  say(
    `gate pid ${gate.pid} started among them, ready ${historyStartS.toFixed(1)} s after spawn; VmRSS ${mib(memoryKiB(gate.pid).rss)} MiB`,
  );

  // --- the held Revisions: the newest generation of every Service, through the gate's webhook ---
  const rvNow = (plural: string, group: string) => async () =>
    (
      (await custom.listClusterCustomObject({ group, version: group === 'prestart.dev' ? 'v1alpha1' : 'v1', plural, limit: 1 })) as {
        metadata: { resourceVersion: string };
      }
    ).metadata.resourceVersion;
  revisions = await follow(admin, '/apis/serving.knative.dev/v1/revisions', rvNow('revisions', 'serving.knative.dev'));
  runs = await follow(admin, '/apis/prestart.dev/v1alpha1/prestartruns', rvNow('prestartruns', 'prestart.dev'));
  const runState = new Map<string, PrestartRunStatus | undefined>();
  runs.onEvent((run) => {
    const key = `${run.metadata?.namespace}/${run.metadata?.name}`;
    if (runState.has(key)) runState.set(key, run.status);
  });
  const requested = (keys: readonly string[]) => keys.filter((k) => runState.get(k)?.hooks?.[0]?.phase === 'Requested').length;
  const createHeld = async (ns: string, svc: string, gen: number, hook: string): Promise<string> => {
    const rev = revisionOf(ns, svc, gen, configurationUID.get(`${ns}/${svc}`), { [HOOK_KEY]: hook });
    const key = `${ns}/${rev.metadata.name}`;
    runState.set(key, undefined);
    heldKeys.push(key);
    const created = (await writer.send('POST', `${apiPath(SERVING, ns, 'revisions')}?fieldManager=controller`, rev)) as KubernetesObject;
    if (created.metadata?.labels?.[HOLD_LABEL] !== 'true') throw new Error(`${key} was admitted without the hold`);
    await writer
      .send(
        'PATCH',
        `${apiPath(SERVING, ns, 'revisions', rev.metadata.name)}/status?fieldManager=controller`,
        { status: revisionStatus(false, now) },
        'application/merge-patch+json',
      )
      .catch((err: unknown) => {
        // The gate writes its condition on the status too; a conflict there is the gate's, not ours.
        if (!(err instanceof BulkError && err.status === 409)) throw err;
      });
    return key;
  };
  const tHeld = performance.now();
  const held: string[] = [];
  await inParallel(N.namespaces * N.services, 16, async (i) => {
    const nsIndex = Math.floor(i / N.services);
    held.push(
      await createHeld(namespaces[nsIndex] as string, services[i % N.services] as string, N.generations, hookOf(nsIndex, i % N.services)),
    );
  });
  await waitFor(() => requested(held) === held.length, {
    timeoutMs: 600_000,
    intervalMs: 500,
    what: `${held.length} held runs Requested`,
    bail: () => (gate?.process.child.exitCode !== null ? new Error(`the gate exited:\n${gate?.process.output().slice(-3000)}`) : undefined),
  });
  say(
    `${held.length} Revisions held by ${N.hooks} hooks, all Requested, ${((performance.now() - tHeld) / 1000).toFixed(0)} s after the first create`,
  );

  // kwok marks the pods Running in the background; wait (bounded) so its writes do not skew what follows.
  const podsPending = async () => {
    const list = await env.core.listPodForAllNamespaces({ fieldSelector: `status.phase!=Running,spec.nodeName=${node}`, limit: 500 });
    return list.items.length + (list.metadata?._continue ? 500 : 0);
  };
  const tKwok = performance.now();
  let pending = await podsPending();
  while (pending > 0 && performance.now() - tKwok < N.podsWaitS * 1000) {
    await pause(10_000);
    pending = await podsPending();
  }
  say(
    pending === 0
      ? `every pod Running (kwok), ${((performance.now() - tPods) / 1000).toFixed(0)} s after the first create`
      : `kwok still has ${pending >= 500 ? '500 or more' : pending} pods to start after --pods-wait ${N.podsWaitS} s; going on`,
  );

  // --- 1. steady RSS ----------------------------------------------------------------------------
  await pause(N.settleS * 1000);
  const steady = memoryKiB(gate.pid);
  const steadyParts = rssParts(gate.pid);
  const steadyGc = await afterGc(gate.pid, heapFile);
  say(
    `steady: VmRSS ${mib(steady.rss)} MiB (anonymous ${mib(steadyParts.anon)}, file-backed ${mib(steadyParts.file)}), VmHWM ${mib(steady.hwm)} MiB; ` +
      `after a full GC: V8 heap in use ${mib(steadyGc.heapUsed)} MiB of ${mib(steadyGc.heapTotal)} committed, VmRSS ${mib(steadyGc.rss)} MiB; ${load()}`,
  );
  figure(
    'gate RSS, steady (compiled JS)',
    `${mib(steady.rss)} MiB`,
    `${mib(idle.rss)} MiB idle at start`,
    `+${mib(steady.rss - idle.rss)} MiB`,
    '< 150 MiB',
    steady.rss / 1024 < 150,
  );

  // --- 2. RSS peak during a full re-list ----------------------------------------------------------
  const informers = ['revisions (held)', 'revisions (all, metadata)', 'routes', 'prestartruns'];
  const ext = admin.makeApiClient(ApiextensionsV1Api);
  const crds = ['revisions.serving.knative.dev', 'routes.serving.knative.dev', 'prestartruns.prestart.dev'];
  /** A printer column added (or taken away again): a CRD update, after which the apiserver ends every watch of it. */
  const printerColumn = async (crdName: string, add: boolean) => {
    const crd = await ext.readCustomResourceDefinition({ name: crdName });
    const ops = crd.spec.versions.map((v, i) => {
      const cols = (v.additionalPrinterColumns ?? []).filter((c) => c.name !== 'BenchRelist');
      if (add) cols.push({ name: 'BenchRelist', type: 'string', jsonPath: '.metadata.name', priority: 9 });
      return { op: 'add', path: `/spec/versions/${i}/additionalPrinterColumns`, value: cols };
    });
    await ext.patchCustomResourceDefinition({ name: crdName, body: ops }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
  };
  /**
   * Every informer of the controller lists everything again, as after an upgrade of the CRDs: the
   * gate is paused (SIGSTOP) so that it writes nothing and its watches stop where they are, etcd is
   * compacted, the CRDs are updated (the apiserver ends their watches and starts new caches), and
   * the gate resumes: no watch can come back from where it stopped (410 Gone). Waits until each
   * informer has re-listed; returns seconds and which did.
   */
  const relist = async () => {
    const from = gate?.logLines().next ?? 0;
    const pid = gate?.pid as number;
    const t = performance.now();
    const listed = () => new Set((gate?.logLines(from).lines ?? []).filter((l) => l.msg === 'listed').map((l) => String(l.what)));
    const crdOf: Record<string, string> = {
      'revisions (held)': 'revisions.serving.knative.dev',
      'revisions (all, metadata)': 'revisions.serving.knative.dev',
      routes: 'routes.serving.knative.dev',
      prestartruns: 'prestartruns.prestart.dev',
    };
    // A watch can slip through (one the apiserver had not ended yet when the gate resumed): those
    // CRDs get the same again, up to three times.
    for (let attempt = 0; attempt < 3; attempt++) {
      const missing = informers.filter((i) => !listed().has(i));
      if (missing.length === 0) break;
      process.kill(pid, 'SIGSTOP');
      try {
        await compactEtcd(env.cluster.dir);
        for (const crd of new Set(missing.map((i) => crdOf[i] as string))) await printerColumn(crd, attempt % 2 === 0);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      await waitFor(() => informers.every((i) => listed().has(i)), {
        timeoutMs: 40_000,
        intervalMs: 250,
        what: 'every informer to re-list',
      }).catch(() => undefined);
    }
    const done = informers.filter((i) => listed().has(i));
    if (done.length < informers.length) say(`  not re-listed: ${informers.filter((i) => !done.includes(i)).join(', ')}`);
    return { seconds: (performance.now() - t) / 1000, done };
  };
  const beforeRelist = memoryKiB(gate.pid);
  resetPeak(gate.pid);
  const relisted = await relist();
  await pause(5_000);
  const relistPeak = memoryKiB(gate.pid);
  say(
    `re-list of ${relisted.done.join(', ')} done ${relisted.seconds.toFixed(1)} s after the pause, etcd compaction and CRD updates; VmHWM ${mib(relistPeak.hwm)} MiB`,
  );
  figure(
    `gate RSS peak during a full re-list (${relisted.done.length}/${informers.length} informers)`,
    `${mib(relistPeak.hwm)} MiB`,
    `${mib(beforeRelist.rss)} MiB just before`,
    `+${mib(relistPeak.hwm - beforeRelist.rss)} MiB`,
    '< 250 MiB',
    relistPeak.hwm / 1024 < 250,
  );
  for (const crd of crds) await printerColumn(crd, false);

  // --- 3. restart -------------------------------------------------------------------------------
  const unanswered = held.filter((k) => runState.get(k)?.hooks?.[0]?.phase === 'Requested');
  await gate.process.stop();
  const lastSend = Math.max(...unanswered.map((k) => hooks.accepting.last.get(k)?.at ?? 0));
  await pause(Math.max(0, lastSend + RESEND_S * 1000 + 1000 - Date.now()));
  const restartWall = Date.now();
  gate = await spawnScaleGate(cli, gateOpts);
  // What the hooks received: a resend is not written to the run (gate/core/resend.ts).
  const resent = () => unanswered.filter((k) => (hooks.accepting.last.get(k)?.at ?? 0) >= restartWall).length;
  await waitFor(() => resent() === unanswered.length, {
    timeoutMs: 300_000,
    intervalMs: 100,
    what: `${unanswered.length} requests re-sent after the restart`,
  });
  const restartS = (Date.now() - restartWall) / 1000;
  const restartMem = memoryKiB(gate.pid);
  // Where the time to ready went: each informer's list, as the gate logs it.
  const lists = gate
    .logLines()
    .lines.filter((l) => l.msg === 'listed')
    .map((l) => `${String(l.what)} ${String(l.objects)} in ${(Number(l.ms) / 1000).toFixed(1)} s`);
  say(`  restart lists: ${lists.join('; ')}`);
  say(
    `restart: ${unanswered.length} runs reconciled and re-sent ${restartS.toFixed(1)} s after the spawn (ready after ${((gate.readyAt - gate.spawnedAt) / 1000).toFixed(1)} s); VmHWM ${mib(restartMem.hwm)} MiB`,
  );
  figure(
    'restart -> every held run reconciled, requests re-sent',
    `${restartS.toFixed(1)} s (${unanswered.length} runs)`,
    `${firstStartS.toFixed(1)} s first start, empty`,
    `VmHWM ${mib(restartMem.hwm)} MiB`,
    '< 30 s',
    restartS < 30,
  );

  // --- 4. webhook latency through the apiserver ------------------------------------------------
  const probe = (ns: string, annotations: Record<string, string>) => revisionOf(ns, 'probe', 1, undefined, annotations);
  const gatedProbe = JSON.stringify(probe(namespaces[0] as string, { [HOOK_KEY]: hookNames[0] as string }));
  const plainProbe = JSON.stringify(probe(plainNs, {}));
  const dryRun = async (ns: string, body: string, stamped: boolean) => {
    const t = performance.now();
    const rev = (await writer.send('POST', `${apiPath(SERVING, ns, 'revisions')}?dryRun=All`, body)) as KubernetesObject;
    const ms = performance.now() - t;
    if ((rev.metadata?.labels?.[HOLD_LABEL] === 'true') !== stamped) throw new Error(`dry-run in ${ns}: stamped ${!stamped}`);
    return ms;
  };
  for (let i = 0; i < 20; i++) {
    await dryRun(namespaces[0] as string, gatedProbe, true);
    await dryRun(plainNs, plainProbe, false);
  }
  /** The gate's own time answering Revision reviews, to tell it from the apiserver's. */
  const gateReviewTime = async () =>
    histogram(
      await (await fetch(`http://127.0.0.1:${sinkPort}/metrics`)).text(),
      'prestart_gate_admission_duration_seconds',
      /webhook="revisions"/,
    );
  /** The apiserver's own account of its webhook calls and policy checks, to say where a gated create's extra time goes. */
  const apiserverTimes = async () => {
    const text = await writer.getText('/metrics');
    return {
      webhook: histogram(text, 'apiserver_admission_webhook_admission_duration_seconds', /operation="CREATE"/),
      policies: histogram(text, 'apiserver_validating_admission_policy_check_duration_seconds', /./),
    };
  };
  const apiserverBefore = await apiserverTimes();
  const reviewsBefore = await gateReviewTime();
  const gatedMs: number[] = [];
  const plainMs: number[] = [];
  for (let i = 0; i < N.webhook; i++) {
    if (i % 2 === 0) {
      gatedMs.push(
        await dryRun(
          namespaces[i % N.namespaces] as string,
          gatedProbe.replaceAll(namespaces[0] as string, namespaces[i % N.namespaces] as string),
          true,
        ),
      );
      plainMs.push(await dryRun(plainNs, plainProbe, false));
    } else {
      plainMs.push(await dryRun(plainNs, plainProbe, false));
      gatedMs.push(
        await dryRun(
          namespaces[i % N.namespaces] as string,
          gatedProbe.replaceAll(namespaces[0] as string, namespaces[i % N.namespaces] as string),
          true,
        ),
      );
    }
  }
  const wg = summarize(gatedMs);
  const wp = summarize(plainMs);
  const reviewsAfter = await gateReviewTime();
  const gateMean = meanMsBetween(reviewsBefore, reviewsAfter);
  const apiserverAfter = await apiserverTimes();
  const perCall = (k: keyof typeof apiserverAfter) => {
    const calls = apiserverAfter[k].count - apiserverBefore[k].count;
    return calls > 0 ? `${meanMsBetween(apiserverBefore[k], apiserverAfter[k]).toFixed(2)} ms x ${calls}` : 'none';
  };
  say(
    `  the apiserver's account (mean per call, from its histograms): webhook calls ${perCall('webhook')} (the gate's own time in each: below); ` +
      `admission policy checks ${perCall('policies')}`,
  );
  say(
    `webhook: gated p50 ${wg.p50.toFixed(1)} ms p99 ${wg.p99.toFixed(1)} ms; not selected p50 ${wp.p50.toFixed(1)} ms p99 ${wp.p99.toFixed(1)} ms; ` +
      `the gate's own time per review ${gateMean.toFixed(2)} ms (mean, from its histogram): the rest of the difference is the apiserver calling a webhook at all`,
  );
  figure(
    'Revision create through the apiserver, p99, gated vs not selected',
    `${wg.p99.toFixed(1)} ms (p50 ${wg.p50.toFixed(1)})`,
    `${wp.p99.toFixed(1)} ms (p50 ${wp.p50.toFixed(1)})`,
    `${(wg.p99 / wp.p99).toFixed(2)}x`,
    '<= 1.3x',
    wg.p99 / wp.p99 <= 1.3,
  );

  // --- 5. 100 concurrent replies -> hold gone, vs a label PATCH -> the watch -------------------
  const pool = [...unanswered];
  const take = (n: number) => pool.splice(0, n);
  const baselineKeys = namespaces.map((ns) => `${ns}/${services[0]}-${pad(1, 5)}`);
  let markSeq = 0;
  /** A hook's reply, sent again after a 503 as the SDK does; the 503s are counted for the report. */
  const reply = async (req: ReceivedRequest, key: string) => {
    for (let attempt = 1; ; attempt++) {
      const answer = await asyncReply(req, 'succeeded', { message: 'done' });
      if (answer.status === 202) return;
      const text = await answer.text();
      if (answer.status !== 503 || attempt >= 5) throw new Error(`the sink answered ${answer.status} for ${key}: ${text}`);
      sinkRetries++;
      await pause(100 * attempt);
    }
  };
  const patchOnce = async (key: string): Promise<number> => {
    const [ns, name] = key.split('/') as [string, string];
    const value = String(++markSeq);
    const seen = revisions?.when(key, (r) => r.metadata?.labels?.[MARK] === value) as Promise<number>;
    const t = performance.now();
    await asGate.send(
      'PATCH',
      apiPath(SERVING, ns, 'revisions', name),
      { metadata: { labels: { [MARK]: value } } },
      'application/merge-patch+json',
    );
    return (await seen) - t;
  };
  const releaseOne = async (key: string): Promise<number> => {
    const seen = revisions?.when(key, (r) => r.metadata?.labels?.[HOLD_LABEL] !== 'true') as Promise<number>;
    const req = hooks.accepting.last.get(key)?.req;
    if (!req) throw new Error(`no request seen for ${key}`);
    const t = performance.now();
    await reply(req, key);
    stored.push(performance.now() - t);
    return (await seen) - t;
  };
  /** When each reply was answered 202 (stored in its run), from its send: the sink's half of a release. */
  const stored: number[] = [];
  const single: number[] = [];
  for (const key of baselineKeys.slice(0, N.concurrent / 2)) single.push(await patchOnce(key));
  const concurrentKeys = take(N.concurrent);
  const releases = await Promise.all(concurrentKeys.map(releaseOne));
  const patches = await Promise.all(baselineKeys.slice(0, N.concurrent).map(patchOnce));
  for (const key of baselineKeys.slice(N.concurrent / 2, N.concurrent)) single.push(await patchOnce(key));
  const rs = summarize(releases);
  const ss = summarize(single);
  const cs = summarize(patches);
  say(
    `releases (${N.concurrent} at once): p50 ${rs.p50.toFixed(0)} ms p99 ${rs.p99.toFixed(0)} ms (the replies stored: p50 ${summarize(stored).p50.toFixed(0)} ms p99 ${summarize(stored).p99.toFixed(0)} ms); one PATCH p99 ${ss.p99.toFixed(1)} ms; ${N.concurrent} PATCHes at once p99 ${cs.p99.toFixed(0)} ms`,
  );
  figure(
    `${N.concurrent} concurrent replies -> hold label gone, p99`,
    `${rs.p99.toFixed(0)} ms (p50 ${rs.p50.toFixed(0)})`,
    `${ss.p99.toFixed(1)} ms one label PATCH; ${cs.p99.toFixed(0)} ms ${N.concurrent} PATCHes at once (as the gate)`,
    `${(rs.p99 / ss.p99).toFixed(1)}x one; ${(rs.p99 / cs.p99).toFixed(2)}x at once`,
    '<= 3x',
    rs.p99 / ss.p99 <= 3,
  );

  // --- 6. replies applied per second vs the apiserver's own status writes -------------------------
  const replyKeys = take(N.throughput);
  const oldRunKeys = namespaces.flatMap((ns) => services.map((svc) => `${ns}/${svc}-${pad(2, 5)}`)).slice(0, N.throughput);
  const oldRuns = new Map<string, KubernetesObject & { status?: PrestartRunStatus }>();
  await inParallel(oldRunKeys.length, 16, async (i) => {
    const [ns, name] = (oldRunKeys[i] as string).split('/') as [string, string];
    oldRuns.set(oldRunKeys[i] as string, (await asGate.send('GET', apiPath(PRESTART, ns, 'prestartruns', name))) as KubernetesObject);
  });
  const rounds = 3;
  const per = Math.floor(N.throughput / rounds);
  let replyTime = 0;
  let writeTime = 0;
  let writeSeq = 0;
  for (let r = 0; r < rounds; r++) {
    const writes = oldRunKeys.slice(r * per, (r + 1) * per);
    let t = performance.now();
    await inParallel(writes.length, 16, async (i) => {
      const key = writes[i] as string;
      const run = oldRuns.get(key) as KubernetesObject & { status?: PrestartRunStatus };
      const [ns, name] = key.split('/') as [string, string];
      const updated = (await asGate.send('PUT', `${apiPath(PRESTART, ns, 'prestartruns', name)}/status`, {
        ...run,
        status: { ...run.status, observedRetry: `bench-${++writeSeq}` },
      })) as KubernetesObject;
      oldRuns.set(key, updated);
    });
    writeTime += performance.now() - t;
    const replies = replyKeys.slice(r * per, (r + 1) * per);
    t = performance.now();
    await inParallel(replies.length, 16, async (i) => {
      const req = hooks.accepting.last.get(replies[i] as string)?.req;
      if (!req) throw new Error(`no request seen for ${replies[i]}`);
      await reply(req, replies[i] as string);
    });
    replyTime += performance.now() - t;
  }
  const replyRate = (per * rounds) / (replyTime / 1000);
  const writeRate = (per * rounds) / (writeTime / 1000);
  say(`replies ${replyRate.toFixed(0)}/s (stored, 202), apiserver status writes ${writeRate.toFixed(0)}/s`);
  figure(
    'replies applied per second, state written',
    `${replyRate.toFixed(0)}/s`,
    `${writeRate.toFixed(0)}/s run status PUTs (as the gate)`,
    `${(replyRate / writeRate).toFixed(2)}x`,
    '>= 0.5x',
    replyRate / writeRate >= 0.5,
  );

  // --- 7. a healthy hook's Revision while 1,000 wait on a hook that never answers ----------------
  const fastHook = `${instance}-fast`;
  const hangHook = `${instance}-hang`;
  await env.createHook(fastHook, {
    match: { annotation: { key: HOOK_KEY, value: fastHook }, namespaceSelector: gatedNamespaces },
    delivery: { transport: 'http', url: hooks.fast.url },
  });
  await env.createHook(hangHook, {
    match: { annotation: { key: HOOK_KEY, value: hangHook }, namespaceSelector: gatedNamespaces },
    timeout: '1h',
    resendInterval: `${RESEND_S}s`,
    delivery: { transport: 'http', url: hooks.hanging.url },
  });
  await env.waitUntilStamped(hangHook, { [HOOK_KEY]: hangHook });
  await env.waitUntilStamped(fastHook, { [HOOK_KEY]: fastHook });
  let fastSeq = 0;
  const healthyRelease = async (): Promise<number> => {
    const i = fastSeq++;
    const ns = namespaces[i % N.namespaces] as string;
    const svc = `fast-${pad(i, 3)}`;
    const key = `${ns}/${svc}-00001`;
    const seen = revisions?.when(key, (r) => r.metadata?.labels?.[HOLD_LABEL] !== 'true') as Promise<number>;
    const t = performance.now();
    await createHeld(ns, svc, 1, fastHook);
    return (await seen) - t;
  };
  await healthyRelease();
  const unloaded: number[] = [];
  for (let i = 0; i < N.samples; i++) unloaded.push(await healthyRelease());
  const hanging: string[] = [];
  await inParallel(N.hang, 16, async (i) => {
    hanging.push(await createHeld(namespaces[i % N.namespaces] as string, `hang-${pad(Math.floor(i / N.namespaces), 3)}`, 1, hangHook));
  });
  await waitFor(() => requested(hanging) === hanging.length, {
    timeoutMs: 600_000,
    intervalMs: 500,
    what: `${hanging.length} runs on the hanging hook Requested`,
  });
  say(`${hanging.length} Revisions wait on ${hangHook} (${hooks.hanging.count} sends reached it so far)`);
  const loaded: number[] = [];
  for (let i = 0; i < N.samples; i++) loaded.push(await healthyRelease());
  const us = summarize(unloaded);
  const ls = summarize(loaded);
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
  const [um, lm] = [median(unloaded), median(loaded)];
  say(
    `healthy release: unloaded median ${um.toFixed(0)} ms (max ${us.p99.toFixed(0)}), with ${N.hang} hanging median ${lm.toFixed(0)} ms (max ${ls.p99.toFixed(0)}); the hanging hook got ${hooks.hanging.count} sends`,
  );
  figure(
    `healthy hook's Revision released, ${N.hang} waiting on a hanging hook`,
    `${lm.toFixed(0)} ms median (max ${ls.p99.toFixed(0)})`,
    `${um.toFixed(0)} ms unloaded (max ${us.p99.toFixed(0)})`,
    `${(lm / um).toFixed(2)}x`,
    '<= 2x',
    lm / um <= 2,
  );
  const end = memoryKiB(gate.pid);

  // --- report -----------------------------------------------------------------------------------
  console.log('');
  console.log(
    `scale: ${made.revisions + heldKeys.length} Revisions in ${N.namespaces} namespaces (${heldKeys.length} held at some point: ${held.length} by ${N.hooks} hooks, ` +
      `${hanging.length} on the hanging hook, ${fastSeq} healthy), ${made.runs + heldKeys.length} PrestartRuns, ${made.routes} Routes, ${made.pods} pods; ` +
      `gate VmRSS at the end ${mib(end.rss)} MiB (VmHWM since the restart ${mib(end.hwm)} MiB)`,
  );
  table([['figure', 'measured', 'baseline (same run)', 'ratio / difference', 'goal', 'met'], ...results]);
  // What the (restarted) gate complained about, by message: conflicts, failed reconciles, refusals.
  const complaints = new Map<string, number>();
  for (const l of gate.logLines().lines) {
    if (Number(l.level) < 40 && l.msg !== 'reconcile failed; retrying with backoff') continue;
    const err = typeof l.err === 'object' && l.err !== null ? String((l.err as { message?: unknown }).message) : l.err;
    const why = err ?? (typeof l.reason === 'string' ? l.reason : undefined);
    const msg = `${l.msg}${why ? `: ${String(why).slice(0, 100)}` : ''}`;
    complaints.set(msg, (complaints.get(msg) ?? 0) + 1);
  }
  if (complaints.size > 0) table([['gate log (since the restart)', 'count'], ...[...complaints].map(([m, c]) => [m, String(c)])]);
  if (sinkRetries > 0) console.log(`  ${sinkRetries} replies answered 503 by the sink were sent again (as hooks do)`);
  console.log(`  ${load()}`);
  const cp = controlPlaneMemory(env.cluster.dir);
  if (cp.length > 0) table([['control plane', 'VmRSS MiB', 'VmHWM MiB'], ...cp.map((c) => [c.name, mib(c.memory.rss), mib(c.memory.hwm)])]);
  console.log(`total ${((performance.now() - T0) / 60_000).toFixed(1)} min`);
  console.log(`reproduce: node --import tsx bench/scale.ts ${process.argv.slice(2).join(' ')}`);
} catch (err) {
  // What the gate said last, to tell a bench failure from a gate one.
  const lines = gate?.logLines().lines.filter((l) => Number(l.level) >= 40) ?? [];
  for (const l of lines.slice(-20)) console.error(`gate: ${JSON.stringify(l)}`);
  throw err;
} finally {
  await cleanup();
}
process.exit(0);
