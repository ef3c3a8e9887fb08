// What exporting traces and being scraped cost the gate, in one run: two gates in this process on
// the same control plane, one exporting its spans over OTLP to a real Jaeger and scraped every
// second by a real Prometheus ("on"), one doing neither ("off"), measured in alternation.
//
//   webhook: a matching Revision's create, timed at the client (the gate's Revision webhook
//            stamps the hold inside it);
//   release: a hook's reply POST -> a watch sees the hold label gone (sink, run status, observer
//            and spans, release).
//
// The instruments themselves (counters, histograms, the observer that diffs each reconcile) are
// always on in the gate, in both: "off" is what a gate costs with nobody collecting; the
// difference is the export and the scrapes. Their own CPU cost per call is measured last, in a
// loop, without I/O.
//
//   node --import tsx bench/observability-overhead.ts [--revisions 40]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { type Jaeger, startJaeger } from '@knative-prestart/devcluster/jaeger.ts';
import { type Prometheus, startPrometheus } from '@knative-prestart/devcluster/prometheus.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { Watch } from '@kubernetes/client-node';
import type { RevisionObject } from '../api/resources.ts';
import type { PrestartRunView } from '../api/types.ts';
import { decide } from '../gate/core/index.ts';
import type { Observed } from '../gate/core/types.ts';
import { createMetrics } from '../gate/telemetry/metrics.ts';
import { startTracing } from '../gate/telemetry/tracing.ts';
import { load, ms, reproduce, retryOnWebhookReset, summarize, table } from './_common.ts';

const { values: args } = parseArgs({ options: { revisions: { type: 'string', default: '40' } } });
const REVISIONS = Number(args.revisions);

process.env.GATE_LOG_LEVEL ??= 'error';
console.log(`observability-overhead: ${load()} at start`);
const t0 = performance.now();

interface Side {
  label: 'off' | 'on';
  env: GateEnv;
  hook: HookServer;
  requests: Map<string, ReceivedRequest>;
  waiting: Map<string, (at: number) => void>;
  watch?: AbortController;
  webhook: number[];
  release: number[];
}

let jaeger: Jaeger | undefined;
let prom: Prometheus | undefined;
const sides: Side[] = [];
let stopping = false;

async function side(label: Side['label']): Promise<Side> {
  const env = await gateEnv(`bench-obs-${label}-${randomBytes(2).toString('hex')}`, { inProcess: false });
  if (label === 'on' && jaeger) await env.startGate({ tracing: { endpoint: jaeger.otlpTracesUrl } });
  else await env.startGate();
  const requests = new Map<string, ReceivedRequest>();
  const hook = await startHookServer(async (req) => {
    if (req.data.action === 'start') requests.set(req.data.revision.name, req);
    return { status: 202 };
  });
  const s: Side = { label, env, hook, requests, waiting: new Map(), webhook: [], release: [] };
  const startWatch = async (): Promise<void> => {
    s.watch = await new Watch(env.admin).watch(
      `/apis/serving.knative.dev/v1/namespaces/${env.namespace}/revisions`,
      {},
      (_type: string, obj: RevisionObject) => {
        const at = performance.now();
        const resolve = s.waiting.get(obj.metadata?.name ?? '');
        if (resolve && !isHeld(obj)) {
          s.waiting.delete(obj.metadata?.name ?? '');
          resolve(at);
        }
      },
      () => {
        if (!stopping) void startWatch();
      },
    );
  };
  await startWatch();
  const hookName = `${env.instance}-db`;
  await env.createHook(hookName, {
    match: env.annotationMatch('bench'),
    timeout: '1h',
    resendInterval: '1h',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { bench: 'yes' });
  return s;
}

async function createOne(s: Side, name: string): Promise<void> {
  const started = performance.now();
  await retryOnWebhookReset(() => s.env.createRevision(name, { annotations: { bench: 'yes' } }));
  s.webhook.push(performance.now() - started);
}

async function releaseOne(s: Side, name: string): Promise<void> {
  const req = s.requests.get(name) as ReceivedRequest;
  const released = new Promise<number>((resolve) => s.waiting.set(name, resolve));
  const started = performance.now();
  const answer = await asyncReply(req, 'succeeded');
  if (answer.status !== 202) throw new Error(`the sink answered ${answer.status} for ${name}`);
  s.release.push((await released) - started);
}

/** The instruments' own cost: a hold-to-release cycle through decide and the observer, no I/O. */
async function instrumentCost(): Promise<{ observerUs: number; spansUs: number }> {
  const revision = {
    namespace: 'bench',
    name: 'r-00001',
    uid: 'u',
    labels: { 'prestart.dev/hold': 'true' },
    annotations: { 'prestart.dev/hooks': '["db"]' },
    images: [],
    createdAt: new Date(0),
    deleting: false,
    finalizers: [],
  };
  const hooks = new Map([
    [
      'db',
      {
        name: 'db',
        generation: 1,
        spec: {
          match: {},
          order: 0,
          timeout: '60s',
          failurePolicy: 'Fail' as const,
          resendInterval: '0s',
          delivery: { transport: 'http' as const, url: 'http://h' },
        },
      },
    ],
  ]);
  type Observe = ReturnType<typeof createMetrics>['observer']['reconciled'];
  const measure = (observe: Observe): number => {
    const n = 2000;
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      const first: Observed = { revision: { ...revision, uid: `u${i}` }, hooks, namedByTraffic: false, now: new Date(1000) };
      const created = decide(first);
      observe(first, created);
      const create = created.actions[0];
      if (create?.type !== 'createRun') throw new Error('expected createRun');
      // Created with the hook already Requested; the second look is the informer bringing the run.
      const run: PrestartRunView = { namespace: 'bench', name: revision.name, uid: `run${i}`, spec: create.spec, status: create.status };
      const second: Observed = { ...first, run, now: new Date(2000) };
      observe(second, decide(second));
      const hooksDone = create.status.hooks.map((h) => ({
        ...h,
        phase: 'Succeeded' as const,
        answeredAt: new Date(3000).toISOString(),
      }));
      const third: Observed = { ...second, run: { ...run, status: { ...create.status, hooks: hooksDone } }, now: new Date(4000) };
      observe(third, decide(third));
    }
    return ((performance.now() - started) * 1000) / n;
  };
  measure(() => undefined); // warm-up: the JIT, the first allocations
  const bare = measure(() => undefined);
  const metrics = createMetrics();
  const plain = measure((o, d) => metrics.observer.reconciled(o, d));
  // Spans built and batched for an exporter nobody listens on (port 9): the SDK's cost, not the network's.
  const tracing = await startTracing({ endpoint: 'http://127.0.0.1:9/v1/traces', exportDelayMs: 60_000 });
  const traced = createMetrics(false, tracing);
  const withSpans = measure((o, d) => traced.observer.reconciled(o, d));
  void tracing.shutdown().catch(() => undefined);
  return { observerUs: plain - bare, spansUs: withSpans - bare };
}

try {
  jaeger = await startJaeger();
  const off = await side('off');
  const on = await side('on');
  sides.push(off, on);
  prom = await startPrometheus({ targets: [new URL(on.env.gate.sinkUrl).host], scrapeIntervalSeconds: 1 });
  const names = Array.from({ length: REVISIONS }, (_, i) => `obs-${String(i + 1).padStart(5, '0')}`);
  for (const [i, name] of names.entries()) {
    const order = i % 2 === 0 ? [off, on] : [on, off];
    for (const s of order) await createOne(s, name);
  }
  for (const s of sides) {
    await waitFor(() => s.requests.size === REVISIONS, {
      timeoutMs: 120_000,
      what: `requests for all ${REVISIONS} Revisions (${s.label})`,
    });
    await waitFor(
      async () => {
        const list = (await s.env.custom.listNamespacedCustomObject({
          group: 'prestart.dev',
          version: 'v1alpha1',
          plural: 'prestartruns',
          namespace: s.env.namespace,
        })) as { items: { status?: { hooks?: { phase: string }[] } }[] };
        return list.items.filter((r) => r.status?.hooks?.[0]?.phase === 'Requested').length === REVISIONS;
      },
      { timeoutMs: 120_000, what: `all ${REVISIONS} PrestartRuns Requested (${s.label})` },
    );
  }
  for (const [i, name] of names.entries()) {
    const order = i % 2 === 0 ? [off, on] : [on, off];
    for (const s of order) await releaseOne(s, name);
  }
  const promQuery = prom.query.bind(prom);
  const scraped = await waitFor(
    async () => ((await promQuery('prestart_gate_runs_total{outcome="released"}'))[0]?.value ?? 0) >= REVISIONS,
    {
      what: `Prometheus to have scraped all ${REVISIONS} releases`,
      timeoutMs: 30_000,
    },
  ).then(() => REVISIONS);
  const spans = await waitFor(
    async () => (await fetch(`${jaeger?.queryUrl}/api/services`).then((r) => r.json())) as { data: string[] | null },
    {
      what: 'Jaeger to list the gate',
      timeoutMs: 30_000,
    },
  );

  const row = (what: string, a: number[], b: number[]) => {
    const x = summarize(a);
    const y = summarize(b);
    return [what, String(x.n), ms(x.p50), ms(y.p50), (y.p50 / x.p50).toFixed(2), ms(x.p99), ms(y.p99), (y.p99 / x.p99).toFixed(2)];
  };
  console.log(`\n${REVISIONS} Revisions per gate, created and then released in alternation (off, on / on, off)`);
  table([
    ['measure', 'n', 'off p50 ms', 'on p50 ms', 'on/off', 'off p99 ms', 'on p99 ms', 'on/off'],
    row('webhook: Revision create (stamped by the gate)', off.webhook, on.webhook),
    row('release: reply POST -> watch sees hold gone', off.release, on.release),
  ]);
  console.log(
    `  "on": spans exported to Jaeger (services: ${(spans.data ?? []).join(', ')}), scraped every 1 s (runs released: ${scraped})`,
  );
  const cost = await instrumentCost();
  const us = (v: number) => (v < 1 ? 'under 1 µs (the loop cannot tell it from decide alone)' : `${v.toFixed(1)} µs`);
  console.log(
    `  instruments alone, per hold-to-release cycle (3 reconciles; the observer's time over decide's): ${us(cost.observerUs)} without spans, ${us(cost.spansUs)} with the run and attempt spans recorded`,
  );
  console.log(`  ${load()}`);
  console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  reproduce('bench/observability-overhead.ts');
} finally {
  stopping = true;
  for (const s of sides) {
    s.watch?.abort();
    await s.hook.close();
    await s.env.stop();
  }
  await prom?.stop();
  await jaeger?.stop();
  await sides[0]?.env.cluster.stop();
}
process.exit(0);
