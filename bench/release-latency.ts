// The gate's added latency between a hook's completed reply and the Revision's release: the
// reply is POSTed to the gate's sink, the sink stores it in the PrestartRun and answers 202, the
// controller sees the run change and removes the hold label. A watch on revisions (started
// before anything else) timestamps the moment the label is gone, as Knative's own informer would.
// Baseline, interleaved with the releases: one merge patch of a label on an unheld Revision of
// the same namespace, timed the same way (PATCH sent -> watch sees it): one apiserver write seen
// through a watch, the least a release can cost.
//
// The Revisions are all created and held first (hook answers 202, never resends), then released
// one at a time by the gate running in this process.
//
//   node --import tsx bench/release-latency.ts [--revisions 100]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import type { RevisionObject } from '../api/resources.ts';
import { inBatches, load, ms, reproduce, retryOnWebhookReset, summarize, table, webhookResets } from './_common.ts';

const { values: args } = parseArgs({ options: { revisions: { type: 'string', default: '100' } } });
const REVISIONS = Number(args.revisions);
const MARK = 'bench.prestart.dev/mark';

process.env.GATE_LOG_LEVEL ??= 'error';
console.log(`release-latency: ${load()} at start`);
console.log(
  'simplified: one release at a time, so no queueing and no contention between replies; bench/scale.ts releases 100 at once and measures replies per second',
);
const t0 = performance.now();
const env = await gateEnv(`bench-rel-${randomBytes(2).toString('hex')}`);
const hookName = `${env.instance}-db`;
const requests = new Map<string, ReceivedRequest>();
const hook = await startHookServer(async (req) => {
  if (req.data.action === 'start') requests.set(req.data.revision.name, req);
  return { status: 202 };
});

/** Resolvers waiting for a watch event on a Revision, by name. */
const waiting = new Map<string, { until: (rev: RevisionObject) => boolean; resolve: (at: number) => void }>();
let watch: AbortController | undefined;
let stopping = false;
async function startWatch(): Promise<void> {
  watch = await new Watch(env.admin).watch(
    `/apis/serving.knative.dev/v1/namespaces/${env.namespace}/revisions`,
    {},
    (_type: string, obj: RevisionObject) => {
      const at = performance.now();
      const name = obj.metadata?.name ?? '';
      const w = waiting.get(name);
      if (w?.until(obj)) {
        waiting.delete(name);
        w.resolve(at);
      }
    },
    (err: unknown) => {
      if (!stopping) {
        console.error(`watch ended (${String(err)}); restarting`);
        void startWatch();
      }
    },
  );
}
function seen(name: string, until: (rev: RevisionObject) => boolean): Promise<number> {
  return new Promise((resolve) => waiting.set(name, { until, resolve }));
}

const names = Array.from({ length: REVISIONS }, (_, i) => `rel-${String(i + 1).padStart(5, '0')}`);
try {
  await startWatch();
  await env.createHook(hookName, {
    match: env.annotationMatch('bench'),
    timeout: '1h',
    resendInterval: '1h',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { bench: 'yes' });
  await env.createRevision('plain-00001');
  await inBatches(names.length, 8, async (i) => {
    await retryOnWebhookReset(() => env.createRevision(names[i] as string, { annotations: { bench: 'yes' } }));
  });
  await waitFor(() => requests.size === REVISIONS, { timeoutMs: 120_000, what: `requests for all ${REVISIONS} Revisions` });
  // A reply is accepted only for an attempt the run records: wait until every run says Requested.
  await waitFor(
    async () => {
      const list = (await env.custom.listNamespacedCustomObject({
        group: 'prestart.dev',
        version: 'v1alpha1',
        plural: 'prestartruns',
        namespace: env.namespace,
      })) as { items: { status?: { hooks?: { phase: string }[] } }[] };
      return list.items.filter((r) => r.status?.hooks?.[0]?.phase === 'Requested').length === REVISIONS;
    },
    { timeoutMs: 120_000, what: `all ${REVISIONS} PrestartRuns Requested` },
  );
  console.log(
    `setup (${REVISIONS} held Revisions) ${((performance.now() - t0) / 1000).toFixed(1)} s; ${load()}` +
      (webhookResets.count > 0 ? `; ${webhookResets.count} creates retried after a webhook connection reset` : ''),
  );

  const custom = env.admin.makeApiClient(CustomObjectsApi);
  const patchOnce = async (value: string): Promise<number> => {
    const watched = seen('plain-00001', (rev) => rev.metadata?.labels?.[MARK] === value);
    const started = performance.now();
    await custom.patchNamespacedCustomObject(
      {
        group: 'serving.knative.dev',
        version: 'v1',
        plural: 'revisions',
        namespace: env.namespace,
        name: 'plain-00001',
        body: { metadata: { labels: { [MARK]: value } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    return (await watched) - started;
  };
  const releaseOne = async (name: string): Promise<{ ack: number; total: number }> => {
    const req = requests.get(name) as ReceivedRequest;
    const released = seen(name, (rev) => !isHeld(rev));
    const started = performance.now();
    const answer = await asyncReply(req, 'succeeded');
    const ack = performance.now() - started;
    if (answer.status !== 202) throw new Error(`the sink answered ${answer.status} for ${name}: ${await answer.text()}`);
    return { ack, total: (await released) - started };
  };

  const baseline: number[] = [];
  const ack: number[] = [];
  const total: number[] = [];
  const afterAck: number[] = [];
  for (const [i, name] of names.entries()) {
    const take = (r: { ack: number; total: number }) => {
      ack.push(r.ack);
      total.push(r.total);
      afterAck.push(r.total - r.ack);
    };
    if (i % 2 === 0) {
      baseline.push(await patchOnce(String(i)));
      take(await releaseOne(name));
    } else {
      take(await releaseOne(name));
      baseline.push(await patchOnce(String(i)));
    }
  }
  const b = summarize(baseline);
  const s = summarize(ack);
  const t = summarize(total);
  const a = summarize(afterAck);
  console.log(`\n${REVISIONS} releases, one at a time, each next to one baseline label patch (alternating order)`);
  table([
    ['measure', 'n', 'p50 ms', 'p99 ms'],
    ['baseline: label PATCH -> watch sees it', String(b.n), ms(b.p50), ms(b.p99)],
    ['sink: reply POST -> 202 (run status stored)', String(s.n), ms(s.p50), ms(s.p99)],
    ['release: reply POST -> watch sees hold gone', String(t.n), ms(t.p50), ms(t.p99)],
    ['  of which 202 -> watch sees hold gone', String(a.n), ms(a.p50), ms(a.p99)],
    ['release - baseline', '', ms(t.p50 - b.p50), ms(t.p99 - b.p99)],
    ['release / baseline', '', (t.p50 / b.p50).toFixed(2), (t.p99 / b.p99).toFixed(2)],
  ]);
  console.log(`  ${load()}`);
  console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  reproduce('bench/release-latency.ts');
} finally {
  stopping = true;
  watch?.abort();
  await hook.close();
  await env.stop();
  await env.cluster.stop();
}
process.exit(0);
