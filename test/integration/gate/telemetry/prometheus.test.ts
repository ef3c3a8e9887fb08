// The gate's metrics on a real Prometheus (Debian's package): a scripted run on the real control
// plane (three Revisions released, one failed, retried and failed again, then released by an
// admin's hand, one held and approved while its hook never answers), then PromQL over
// Prometheus's HTTP API returns what happened; the example alert rules load and evaluate; every
// panel query of the Grafana dashboard runs and returns data.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { type Prometheus, startPrometheus } from '@knative-prestart/devcluster/prometheus.ts';
import { WaitTimeoutError, waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import { REVISIONS } from '../../../../api/resources.ts';
import { HOLD_LABEL } from '../../../../api/types.ts';
import { approveRevision } from '../../../../hooks/builtin/approval/approve.ts';

const RULES = new URL('../../../../config/monitoring/prometheus-rules.yaml', import.meta.url).pathname;
const DASHBOARD = new URL('../../../../config/monitoring/grafana-dashboard.json', import.meta.url).pathname;

let env: GateEnv;
let hook: HookServer;
let prom: Prometheus;
let hookName: string;

test.before(async () => {
  // The dashboard shows the Revision webhook's timings: registered where the apiserver stamps too.
  env = await gateEnv('metrics', { gate: { revisionWebhook: 'always' } });
  hookName = `${env.instance}-db`;
  // ok-*: succeeds at once; bad-*: fails at once; hang-*: accepted, never answered.
  hook = await startHookServer(async (req) => {
    const name = req.data.revision.name;
    if (name.startsWith('ok-')) return syncReply(req, 'succeeded', { message: 'ready' });
    if (name.startsWith('bad-')) return syncReply(req, 'failed', { message: 'no quota left' });
    return { status: 202 };
  });
  await env.createHook(hookName, {
    match: env.annotationMatch('observe', 'me'),
    resendInterval: '2s',
    timeout: '10m',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { observe: 'me' });
  prom = await startPrometheus({ targets: [new URL(env.gate.sinkUrl).host], ruleFiles: [RULES] });
});

test.after.always(async () => {
  await prom?.stop();
  await hook?.close();
  await env?.stop();
});

/** The one sample `expr` returns, once it equals `expected` (Prometheus scrapes every second). */
async function expectValue(expr: string, expected: number): Promise<void> {
  let last: number | string = 'no sample';
  try {
    await waitFor(
      async () => {
        const samples = await prom.query(expr);
        last = samples.length === 1 ? (samples[0]?.value ?? 'no value') : `${samples.length} samples`;
        return last === expected;
      },
      { what: `${expr} == ${expected}`, timeoutMs: 60_000, intervalMs: 250 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message} (last: ${last})`);
  }
}

test.serial('a scripted run reads back from Prometheus as it happened', async (t) => {
  const annotations = { observe: 'me' };
  const h = `hook="${hookName}"`;
  for (const name of ['ok-00001', 'ok-00002', 'ok-00003']) await env.createRevision(name, { annotations });
  await env.createRevision('bad-00001', { annotations });
  await env.createRevision('hang-00001', { annotations });
  for (const name of ['ok-00001', 'ok-00002', 'ok-00003']) await env.waitReleased(name);
  await env.waitForRun('bad-00001', 'Failed', (r) => r.status?.phase === 'Failed');

  await expectValue(`prestart_gate_runs_total{outcome="released"}`, 3);
  // One observation per release: the histogram counts exactly the released Revisions.
  await expectValue('prestart_gate_hold_duration_seconds_count', 3);
  await expectValue(`prestart_gate_hook_attempt_duration_seconds_count{${h},transport="http",outcome="succeeded"}`, 3);
  await expectValue(`prestart_gate_hook_attempt_duration_seconds_count{${h},outcome="failed"}`, 1);
  await expectValue(`prestart_gate_runs_total{outcome="failed"}`, 1);
  await expectValue('prestart_gate_held_revisions', 2);
  await expectValue(`prestart_gate_hook_held_revisions{${h},phase="Failed"}`, 1);
  await expectValue(`prestart_gate_hook_held_revisions{${h},phase="Requested"}`, 1);
  await expectValue(`prestart_gate_replies_total{transport="direct",result="applied",outcome="succeeded"}`, 3);
  await expectValue(`prestart_gate_replies_total{transport="direct",result="applied",outcome="failed"}`, 1);
  // hang-00001 is asked again every 2 s while it does not answer.
  await waitFor(async () => ((await prom.query(`prestart_gate_hook_resends_total{${h},transport="http"}`))[0]?.value ?? 0) >= 1, {
    what: 'a resend of the unanswered request counted',
    timeoutMs: 60_000,
  });

  // An admin retries the failed hook (it fails again), then takes the hold off by hand.
  await env.annotateRun('bad-00001', { 'prestart.dev/retry': '2' });
  await expectValue(`prestart_gate_hook_retries_total{${h}}`, 1);
  await expectValue(`prestart_gate_hook_attempt_duration_seconds_count{${h},outcome="failed"}`, 2);
  await expectValue(`prestart_gate_runs_total{outcome="failed"}`, 2);
  const custom = env.admin.makeApiClient(CustomObjectsApi);
  const patch = async (name: string, metadata: object) =>
    custom.patchNamespacedCustomObject(
      { ...REVISIONS, namespace: env.namespace, name, body: { metadata } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  await patch('bad-00001', { labels: { [HOLD_LABEL]: null } });
  await expectValue('prestart_gate_break_glass_releases_total{phase="Failed"}', 1);
  await expectValue('prestart_gate_held_revisions', 1);

  // Someone approves the held one: the wait since its hook was asked is measured once.
  // (The approval policy wants the decision signed by whoever writes it: the cluster admin here.)
  await approveRevision({ kubeConfig: env.admin, namespace: env.namespace, revision: 'hang-00001', verdict: 'approved' });
  await expectValue('prestart_gate_approval_wait_seconds_count{verdict="approved"}', 1);

  await expectValue(`prestart_gate_hook_held_revisions{${h},phase="Requested"}`, 1);
  const oldest = await prom.query(`prestart_gate_hook_oldest_hold_seconds{${h}}`);
  t.true((oldest[0]?.value ?? -1) > 0, 'the oldest hold has an age');
  const admissions = await prom.query('prestart_gate_admission_duration_seconds_count{webhook="revisions"}');
  t.true((admissions[0]?.value ?? 0) >= 5, 'every Revision create went through the timed webhook');
  // The gate's own apiserver calls: a create for each of the five runs, and the releases' patches.
  const calls = async (verb: string, resource: string) =>
    (await prom.query(`sum(prestart_gate_kube_request_duration_seconds_count{verb="${verb}",resource="${resource}"})`))[0]?.value ?? 0;
  t.true((await calls('create', 'prestartruns')) >= 5, 'every run create is timed');
  t.true((await calls('update', 'prestartruns/status')) >= 4, 'the replies recorded are timed');
  t.true((await calls('patch', 'revisions')) >= 3, 'the three releases are timed');
  const created = await prom.query('prestart_gate_kube_requests_total{verb="create",resource="prestartruns",code="201"}');
  t.true((created[0]?.value ?? 0) >= 5, 'and counted with the status the apiserver answered');
  t.is((await prom.query('prestart_gate_workqueue_depth')).length, 1);
  t.true(((await prom.query('prestart_gate_workqueue_adds_total'))[0]?.value ?? 0) > 0);
});

test.serial('the example alert rules pass promtool and evaluate on Prometheus without error', async (t) => {
  const { stdout } = await promisify(execFile)('promtool', ['check', 'rules', RULES]);
  t.regex(stdout, /SUCCESS: 7 rules found/);
  const rules = await waitFor(
    async () => {
      const all = await prom.rules();
      return all.length > 0 && all.every((r) => r.health !== 'unknown') ? all : undefined;
    },
    { what: 'every rule evaluated once', timeoutMs: 30_000 },
  );
  t.deepEqual(
    rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`),
    [],
  );
  t.is(rules.length, 7);
});

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

test.serial('every panel query of the Grafana dashboard runs and returns data', async (t) => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] };
  // What Grafana substitutes: the hook variable (its "All" value), and its built-in intervals.
  const substitute = (expr: string) =>
    expr.replaceAll('$hook', '.*').replaceAll('$__rate_interval', '1m').replaceAll('$__range', '1h').replaceAll('$__interval', '15s');
  const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((target) => ({ title: p.title, expr: substitute(target.expr) })));
  t.true(queries.length >= 19);
  const empty: string[] = [];
  for (const q of queries) {
    await prom.query(q.expr); // a bad query throws here, with Prometheus's error
    // A rate needs two scrapes of a series that appeared a moment ago: wait for them, not longer.
    const found = await waitFor(async () => (await prom.query(q.expr)).length > 0, {
      what: `data for "${q.title}"`,
      timeoutMs: 15_000,
      intervalMs: 250,
    }).catch((err: unknown) => (err instanceof WaitTimeoutError ? false : Promise.reject(err)));
    if (!found) empty.push(`${q.title}: ${q.expr}`);
  }
  t.deepEqual(empty, [], 'every query returns data');
});
