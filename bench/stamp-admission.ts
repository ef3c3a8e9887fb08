// What stamping costs a Knative Revision create, in the apiserver, side by side in one run on one
// real kube-apiserver: dry-run Revision creates (all of admission, no write to etcd) in three
// namespaces that differ only in what stamps their Revisions:
//   (a) none: no prestart policy or webhook applies (the baseline; the policies' bindings do not
//       select it);
//   (b) webhook: the gate's Revision webhook (its MutatingWebhookConfiguration, the gate in this
//       process as devcluster/gate/env.ts runs it) and the stamp check, config/210;
//   (c) apiserver: the MutatingAdmissionPolicies of config/230 and the stamp check (210); no webhook;
// at each count of PrestartHooks (--hooks): two that match the Revision (annotation and
// namespaceSelector; revisionSelector and namespace expressions) and the rest that do not, with
// the same kinds of selectors. Knative Serving's own webhook (its real process, with its
// defaulting and validating configurations) is called for every create in all three, as in a
// cluster; the apiserver's metrics give its time per call beside ours.
//
// Creates go in blocks of --block per namespace, the namespaces in rotation so all share the
// machine's noise; around every block the bench reads the apiserver's /metrics, so each figure of
// the apiserver's own (admission steps, each admission plugin, each webhook by name, the
// MutatingAdmissionPolicy evaluations) belongs to one configuration. Then the CEL cost
// (bench/_stamp-cel.ts): per evaluation, as the apiserver's code counts it, and what the apiserver
// does when a Revision drives an evaluation past its per-expression limit.
//
// Nothing is stubbed: real etcd, kube-apiserver, Knative's webhook and controllers, the gate (in
// this process, as the gate benches run it: its webhook shares the event loop with the client,
// which waits for each answer). The hooks' delivery URL is never called. The
// policies are the shipped ones, with two changes so three configurations share one apiserver:
// their bindings select the bench's namespaces by label (spec.matchResources, as 210's header
// describes for a gate scoped to some namespaces), and 230's objects carry a bench- prefix (a
// gate registers no Revision webhook while it finds 230's objects under their shipped names).
// Dry-run: no Revision is stored, so Knative's controller and the gate never act on one.
// This bench changes cluster-wide objects, so it always starts a control plane of its own.
//
//   node --import tsx bench/stamp-admission.ts [--hooks 1,20,200] [--creates 300] [--block 25]
//        [--warmup 20] [--without-knative] [--without-cel]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { applyManifests, parseManifests } from '@knative-prestart/devcluster/apply.ts';
import { type BulkWriter, bulkWriter } from '@knative-prestart/devcluster/bulk.ts';
import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { HOLD_LABEL, HOOKS_ANNOTATION, type PrestartHookSpec } from '../api/types.ts';
import { STAMP_POLICIES } from '../gate/webhooks/stamp-path.ts';
import { webhookConfigurationName } from '../gate/webhooks/tls.ts';
import { histogram, load, ms, reproduce, summarize, table, webhookResets } from './_common.ts';
import { knativeRevision } from './_revision.ts';
import { celCost } from './_stamp-cel.ts';

const { values: args } = parseArgs({
  options: {
    hooks: { type: 'string', default: '1,20,200' },
    creates: { type: 'string', default: '300' },
    block: { type: 'string', default: '25' },
    warmup: { type: 'string', default: '20' },
    'without-knative': { type: 'boolean', default: false },
    'without-cel': { type: 'boolean', default: false },
  },
});
const HOOK_COUNTS = [...new Set(args.hooks.split(',').map(Number))].sort((a, b) => a - b);
const CREATES = Number(args.creates);
const BLOCK = Number(args.block);
const WARMUP = Number(args.warmup);

const STAMP_LABEL = 'bench.prestart.dev/stamp';
/** The same in every namespace, so only the stamp differs: what the hooks' namespace selectors read. */
const NAMESPACE_LABELS = { team: 'checkout', env: 'prod' };
const ANNOTATIONS = { 'serving-binding': 'orders-db' };
const configPath = (file: string) => new URL(`../config/${file}`, import.meta.url).pathname;

type Match = PrestartHookSpec['match'];
type Config = 'none' | 'webhook' | 'apiserver';
const CONFIGS: Config[] = ['none', 'webhook', 'apiserver'];
const TITLES: Record<Config, string> = {
  none: '(a) no stamp',
  webhook: "(b) gate's webhook + 210",
  apiserver: '(c) apiserver MAP 230 + 210',
};

/** Two hooks that match the bench's Revision, and N others that do not (cycling through five kinds). */
const MATCHING: Record<'db' | 'scan', Match> = {
  db: { annotation: { key: 'serving-binding', value: 'orders-db' }, namespaceSelector: { matchLabels: { team: 'checkout' } } },
  scan: {
    namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod', 'staging'] }] },
    revisionSelector: {
      matchExpressions: [
        { key: 'serving.knative.dev/service', operator: 'In', values: ['checkout', 'cart'] },
        { key: 'prestart.example/skip-scan', operator: 'DoesNotExist' },
      ],
    },
  },
};
function otherMatch(i: number): Match {
  switch (i % 5) {
    case 0:
      return { annotation: { key: 'serving-binding', value: `db-${i}` }, namespaceSelector: { matchLabels: { team: 'checkout' } } };
    case 1:
      return { annotation: { key: `corp.example/feature-${i}` } };
    case 2:
      return { namespaceSelector: { matchLabels: { team: `team-${i}` } } };
    case 3:
      return {
        revisionSelector: {
          matchExpressions: [{ key: 'serving.knative.dev/service', operator: 'In', values: [`svc-${i}`, `svc-${i}-b`] }],
        },
      };
    default:
      return {
        namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] },
        revisionSelector: { matchLabels: { 'app.kubernetes.io/name': `app-${i}` } },
      };
  }
}

/** The apiserver's histograms read around each block; the labels pick one series (or a sum of several). */
const has = (...labels: string[]) => new RegExp(labels.map((l) => `(?=.*(?:^|,)${l.replace(/[.]/g, '\\.')})`).join(''));
const webhookCall = (name: string) =>
  ['apiserver_admission_webhook_admission_duration_seconds', has(`name="${name}"`, 'operation="CREATE"')] as const;
function seriesFor(gateWebhook: string) {
  return {
    request: ['apiserver_request_duration_seconds', has('dry_run="All"', 'resource="revisions"', 'verb="POST"')],
    admit: ['apiserver_admission_step_admission_duration_seconds', has('operation="CREATE"', 'type="admit"')],
    validate: ['apiserver_admission_step_admission_duration_seconds', has('operation="CREATE"', 'type="validate"')],
    map: ['apiserver_admission_controller_admission_duration_seconds', has('name="MutatingAdmissionPolicy"', 'operation="CREATE"')],
    vap: ['apiserver_admission_controller_admission_duration_seconds', has('name="ValidatingAdmissionPolicy"', 'operation="CREATE"')],
    mapChecks: ['apiserver_mutating_admission_policy_check_duration_seconds', has('policy="bench-prestart-stamp-revisions"')],
    stripChecks: ['apiserver_mutating_admission_policy_check_duration_seconds', has('policy="bench-prestart-strip-revisions"')],
    gate: webhookCall(gateWebhook),
    knativeDefaulting: webhookCall('url.webhook.serving.knative.dev'),
    knativeValidation: webhookCall('url.validation.webhook.serving.knative.dev'),
  } as const;
}
type SeriesName = keyof ReturnType<typeof seriesFor>;
type Reading = Record<SeriesName, { sum: number; count: number }>;

interface Measured {
  times: number[];
  server: Reading;
}

process.env.GATE_LOG_LEVEL ??= 'error';
if (process.env[KUBECONFIG_ENV]) console.log(`stamp-admission: ignoring ${KUBECONFIG_ENV}: this bench rescopes cluster-wide policies`);
delete process.env[KUBECONFIG_ENV];
delete process.env[CLUSTER_DIR_ENV];
console.log(`stamp-admission: ${load()} at start`);
const t0 = performance.now();
const env = await gateEnv('bench-stamp', { inProcess: false });
let serving: KnativeServing | undefined;
let api: BulkWriter | undefined;
try {
  serving = args['without-knative'] ? undefined : await startKnativeServing(env.cluster);
  api = await bulkWriter(env.admin, 1);
  const writer = api;
  const namespaces: Record<Config, string> = {
    none: `${env.instance}-none`,
    webhook: env.namespace,
    apiserver: `${env.instance}-apiserver`,
  };
  for (const config of CONFIGS) {
    const labels = { ...NAMESPACE_LABELS, [STAMP_LABEL]: config };
    if (config === 'webhook')
      await writer.send('PATCH', `/api/v1/namespaces/${env.namespace}`, { metadata: { labels } }, 'application/merge-patch+json');
    else await env.core.createNamespace({ body: { metadata: { name: namespaces[config], labels } } });
  }
  await installPolicies(env.admin);
  // Started after: a gate registers its Revision webhook only where it finds no apiserver stamp.
  await env.startGate();
  const gateWebhook = await revisionsWebhookName();
  const series = seriesFor(gateWebhook);

  const bodies = Object.fromEntries(CONFIGS.map((c) => [c, JSON.stringify(revisionIn(namespaces[c]))])) as Record<Config, string>;
  /** One dry-run create; the milliseconds to the answer, which is checked: stamped where it should be, with these hooks. */
  const create = async (config: Config, hooks: string[]): Promise<number> => {
    for (let attempt = 1; ; attempt++) {
      const started = performance.now();
      try {
        const rev = (await writer.send(
          'POST',
          `/apis/serving.knative.dev/v1/namespaces/${namespaces[config]}/revisions?dryRun=All`,
          bodies[config],
        )) as {
          metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
        };
        const elapsed = performance.now() - started;
        const stamp = rev.metadata.labels?.[HOLD_LABEL] === 'true' ? (rev.metadata.annotations?.[HOOKS_ANNOTATION] ?? '') : '';
        const want = config === 'none' ? '' : JSON.stringify(hooks);
        if (stamp !== want)
          throw new Error(`${TITLES[config]}: the Revision was stamped ${stamp || 'not at all'}, not ${want || 'not at all'}`);
        return elapsed;
      } catch (err) {
        // The gate's webhook fails open: a call that met a closing keep-alive connection leaves the
        // Revision unstamped and 210 refuses it, as Knative would see it and retry.
        const body = String((err as { body?: unknown }).body ?? '');
        if (attempt >= 3 || !/connection reset by peer|EOF|was not held for it/.test(body)) throw err;
        webhookResets.count++;
      }
    }
  };
  const scrape = async (): Promise<Reading> => {
    const text = await writer.getText('/metrics');
    return Object.fromEntries(Object.entries(series).map(([k, [metric, labels]]) => [k, histogram(text, metric, labels)])) as Reading;
  };

  const hookNames: string[] = [];
  const results = new Map<number, Record<Config, Measured>>();
  for (const count of HOOK_COUNTS) {
    const matching = await setHooks(count, hookNames);
    for (const config of CONFIGS) for (let i = 0; i < WARMUP; i++) await create(config, matching);
    const fresh = (): Measured => ({ times: [], server: zeroReading(series) });
    const measured: Record<Config, Measured> = { none: fresh(), webhook: fresh(), apiserver: fresh() };
    let before = await scrape();
    for (let done = 0, round = 0; done < CREATES; done += BLOCK, round++) {
      const n = Math.min(BLOCK, CREATES - done);
      // Rotate which goes first, so none always follows the same neighbour or a pause.
      for (let j = 0; j < CONFIGS.length; j++) {
        const config = CONFIGS[(round + j) % CONFIGS.length] as Config;
        for (let i = 0; i < n; i++) measured[config].times.push(await create(config, matching));
        const after = await scrape();
        addDiff(measured[config].server, before, after);
        before = after;
      }
    }
    results.set(count, measured);
    console.log(`  ${count} hooks measured after ${((performance.now() - t0) / 1000).toFixed(0)} s; ${load()}`);
  }
  report(results);

  if (!args['without-cel']) {
    const top = HOOK_COUNTS.at(-1) ?? 0;
    const c = results.get(top)?.apiserver;
    const perEvaluation = {
      map: meanPer(c?.server.mapChecks),
      // The plugin's time per create over the hooks: every evaluation and what the plugin does once.
      vap: c ? (c.server.vap.sum / c.times.length / top) * 1000 : Number.NaN,
    };
    const stripFirst = c ? c.server.stripChecks.count > 0 : false;
    const keepOneHook = async () => {
      for (const name of hookNames.filter((n) => n !== 'db')) await env.deleteHook(name);
      hookNames.splice(0, hookNames.length, 'db');
      await stampedWith(['db']);
    };
    await celCost({ admin: env.admin, api: writer, namespaces, hooks: top, perEvaluation, stripFirst, revision: revisionIn, keepOneHook });
  }
  if (webhookResets.count > 0) console.log(`\n${webhookResets.count} creates retried after a webhook connection reset (time included)`);
  console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(0)} s; ${load()}`);
  reproduce('bench/stamp-admission.ts');
} finally {
  api?.close();
  await env.stop();
  await serving?.stop();
  await env.cluster.stop();
}
process.exit(0);

/** The bench's Revision, valid for Knative's webhook (its configuration label needs the owner). */
function revisionIn(namespace: string, extra: { labels?: Record<string, string>; finalizers?: string[] } = {}): object {
  const rev = knativeRevision(namespace, 'checkout-00042', ANNOTATIONS) as {
    metadata: Record<string, unknown> & { labels: Record<string, string> };
  };
  rev.metadata.ownerReferences = [
    {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Configuration',
      name: 'checkout',
      uid: rev.metadata.labels['serving.knative.dev/configurationUID'],
      controller: true,
      blockOwnerDeletion: true,
    },
  ];
  Object.assign(rev.metadata.labels, extra.labels);
  if (extra.finalizers) rev.metadata.finalizers = extra.finalizers;
  return rev;
}

type Doc = ReturnType<typeof parseManifests>[number] & { spec?: object };

/**
 * 210 as gateEnv installed it and 230 under other names (gateEnv installs it under its own where
 * served: removed here), each binding narrowed to the namespaces of its configuration.
 */
async function installPolicies(admin: typeof env.admin): Promise<void> {
  for (const plural of ['mutatingadmissionpolicybindings', 'mutatingadmissionpolicies']) {
    for (const name of STAMP_POLICIES) {
      await api?.send('DELETE', `/apis/admissionregistration.k8s.io/v1/${plural}/${name}`).catch((err: unknown) => {
        if ((err as { status?: number }).status !== 404) throw err;
      });
    }
  }
  const scope = (values: Config[]) => ({ namespaceSelector: { matchExpressions: [{ key: STAMP_LABEL, operator: 'In', values }] } });
  const docs = [
    ...parseManifests(readFileSync(configPath('210-stamp-policy.yaml'), 'utf8')).map((m) =>
      m.kind.endsWith('Binding') ? { ...m, spec: { ...(m as Doc).spec, matchResources: scope(['webhook', 'apiserver']) } } : m,
    ),
    ...parseManifests(readFileSync(configPath('230-stamp-mutating-policy.yaml'), 'utf8')).map((m) => {
      const renamed = { ...m, metadata: { ...m.metadata, name: `bench-${m.metadata?.name}` } };
      if (!m.kind.endsWith('Binding')) return renamed;
      const spec = (m as Doc).spec as { policyName: string };
      return { ...renamed, spec: { ...spec, policyName: `bench-${spec.policyName}`, matchResources: scope(['apiserver']) } };
    }),
  ];
  await applyManifests(admin, docs.map((d) => JSON.stringify(d)).join('\n---\n'));
}

/** The name of the gate's Revision webhook in its configuration (the apiserver's metrics go by it). */
async function revisionsWebhookName(): Promise<string> {
  const api = env.admin.makeApiClient(AdmissionregistrationV1Api);
  const config = await waitFor(
    async () =>
      (await api.readMutatingWebhookConfiguration({ name: webhookConfigurationName(env.instance) })).webhooks?.find((w) =>
        w.rules?.some((r) => r.resources?.includes('revisions')),
      ),
    { what: "the gate's Revision webhook to be registered" },
  );
  return config.name;
}

/**
 * Brings the PrestartHooks to `count`: "db" first, then the ones that do not match, "scan" (the
 * second match) always last, deleted and created again, so that once both configurations stamp it
 * the apiserver's policy caches and the gate's have seen every hook before it. Returns the names
 * a Revision is stamped with.
 */
async function setHooks(count: number, names: string[]): Promise<string[]> {
  const delivery = { transport: 'http' as const, url: 'http://127.0.0.1:9/' };
  if (names.includes('scan')) {
    await env.deleteHook('scan');
    names.splice(names.indexOf('scan'), 1);
    await stampedWith(['db']);
  }
  if (!names.includes('db')) {
    await env.createHook('db', { match: MATCHING.db, delivery });
    names.push('db');
  }
  for (let i = names.length; i < count - 1; i++) {
    const name = `other-${String(i).padStart(3, '0')}`;
    await env.createHook(name, { match: otherMatch(i), delivery });
    names.push(name);
  }
  if (count >= 2) {
    await env.createHook('scan', { match: MATCHING.scan, delivery });
    names.push('scan');
  }
  const matching = count >= 2 ? ['db', 'scan'] : ['db'];
  await stampedWith(matching);
  console.log(`${names.length} PrestartHooks, ${matching.length} matching the Revision; ${load()}`);
  return matching;
}

async function stampedWith(hooks: string[]): Promise<void> {
  for (const config of CONFIGS) {
    const namespace = config === 'webhook' ? env.namespace : `${env.instance}-${config}`;
    const want = config === 'none' ? undefined : JSON.stringify(hooks);
    await waitFor(
      async () => {
        const rev = (await api?.send(
          'POST',
          `/apis/serving.knative.dev/v1/namespaces/${namespace}/revisions?dryRun=All`,
          revisionIn(namespace),
        )) as {
          metadata: { annotations?: Record<string, string> };
        };
        return rev.metadata.annotations?.[HOOKS_ANNOTATION] === want;
      },
      { what: `Revisions in ${namespace} to be stamped with ${want ?? 'nothing'}`, timeoutMs: 60_000 },
    );
  }
}

function zeroReading(series: object): Reading {
  return Object.fromEntries(Object.keys(series).map((k) => [k, { sum: 0, count: 0 }])) as Reading;
}

function addDiff(into: Reading, before: Reading, after: Reading): void {
  for (const k of Object.keys(into) as SeriesName[]) {
    into[k].sum += after[k].sum - before[k].sum;
    into[k].count += after[k].count - before[k].count;
  }
}

/** Milliseconds per observation of a summed histogram. */
function meanPer(h: { sum: number; count: number } | undefined): number {
  return h && h.count > 0 ? (h.sum / h.count) * 1000 : Number.NaN;
}

function report(results: Map<number, Record<Config, Measured>>): void {
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : '-');
  console.log(
    `\nClient wall time of a dry-run Revision create (ms), ${CREATES} per configuration and hook count after ${WARMUP} warm-up, blocks of ${BLOCK} in rotation:`,
  );
  const rows = [['hooks', 'configuration', 'n', 'p50', 'p99', 'mean', 'p50 /(a)', 'p99 /(a)', 'mean /(a)', 'p99 -(a)', 'mean -(a)']];
  for (const [count, measured] of results) {
    const base = summarize(measured.none.times);
    const baseMean = mean(measured.none.times);
    for (const config of CONFIGS) {
      const s = summarize(measured[config].times);
      const m = mean(measured[config].times);
      const vs =
        config === 'none'
          ? ['', '', '', '', '']
          : [ratio(s.p50, base.p50), ratio(s.p99, base.p99), ratio(m, baseMean), ms(s.p99 - base.p99), ms(m - baseMean)];
      rows.push([String(count), TITLES[config], String(s.n), ms(s.p50), ms(s.p99), ms(m), ...vs]);
    }
  }
  table(rows);

  console.log("\nThe apiserver's own account (its /metrics around each block), ms per create; webhook columns: ms per call:");
  const perCreate = (r: Reading, k: SeriesName, n: number) => ms((r[k].sum / n) * 1000);
  const server = [
    [
      'hooks',
      'configuration',
      'request',
      'admit step',
      'validate step',
      'MAP plugin',
      'VAP plugin',
      'MAP evals stamp/strip',
      'gate call',
      'Knative defaulting',
      'Knative validation',
    ],
  ];
  for (const [count, measured] of results) {
    for (const config of CONFIGS) {
      const r = measured[config].server;
      const n = measured[config].times.length;
      server.push([
        String(count),
        TITLES[config],
        ms(meanPer(r.request)),
        perCreate(r, 'admit', n),
        perCreate(r, 'validate', n),
        perCreate(r, 'map', n),
        perCreate(r, 'vap', n),
        `${(r.mapChecks.count / n).toFixed(0)}/${(r.stripChecks.count / n).toFixed(0)}`,
        ms(meanPer(r.gate)),
        ms(meanPer(r.knativeDefaulting)),
        ms(meanPer(r.knativeValidation)),
      ]);
    }
  }
  table(server);
  console.log(
    '  request: apiserver_request_duration_seconds (POST revisions, dryRun); admit/validate step: apiserver_admission_step_admission_duration_seconds;\n' +
      '  MAP/VAP plugin: apiserver_admission_controller_admission_duration_seconds of the MutatingAdmissionPolicy and ValidatingAdmissionPolicy\n' +
      '  plugins (both run, policies or not); MAP evals: apiserver_mutating_admission_policy_check_duration_seconds observations per create\n' +
      "  of 230's stamp (one per hook and pass: the object changed, so the apiserver runs the mutating policies again once) and strip policies;\n" +
      '  calls: apiserver_admission_webhook_admission_duration_seconds.\n' +
      '  Steps and plugins also count any other CREATE the cluster admitted during a block (Events, reviews): a few microseconds each.\n' +
      '  ValidatingAdmissionPolicy evaluations have no histogram of their own while they admit (the apiserver records only denials).',
  );

  const count = results.has(20) ? 20 : HOOK_COUNTS.find((c) => c >= 2);
  const at = count === undefined ? undefined : results.get(count);
  if (!at) return;
  const p99 = (c: Config) => summarize(at[c].times).p99;
  const n = at.apiserver.times.length;
  const policies =
    ((at.apiserver.server.map.sum + at.apiserver.server.vap.sum - at.none.server.map.sum - at.none.server.vap.sum) / n) * 1000;
  const knative = meanPer(at.apiserver.server.knativeDefaulting) + meanPer(at.apiserver.server.knativeValidation);
  console.log(
    `\nAt ${count} hooks: the apiserver stamp (c) adds ${ms(p99('apiserver') - p99('none'))} ms at p99 and ${ms(mean(at.apiserver.times) - mean(at.none.times))} ms on average over (a);` +
      ` its policies take ${ms(policies)} ms per create in the apiserver's plugins (over (a)'s);` +
      ` Knative's two webhook calls take ${ms(knative)} ms per create (mean, apiserver's account).` +
      ` The gate's webhook (b) adds ${ms(p99('webhook') - p99('none'))} ms at p99 and ${ms(mean(at.webhook.times) - mean(at.none.times))} ms on average.`,
  );
  console.log(`  ${load()}`);
}
