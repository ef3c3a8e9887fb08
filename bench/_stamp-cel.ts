// The CEL side of bench/stamp-admission.ts: what one evaluation of the stamp policies costs in the
// apiserver's cost units (bench/stamp-cel-cost.go, built against the apiserver's own code), how
// far the CRD's limits let a PrestartHook push it, and what the apiserver does with a create whose
// evaluation passes the per-expression limit: the Revision carries the one list the policies walk
// that no schema bounds (its finalizers, bounded only by the 3 MiB request), so the bench finds the
// size at which the first evaluation of 230 passes the limit and sends that Revision to the apiserver.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import { cacheDir, pinnedVersions } from '@knative-prestart/devcluster/binaries.ts';
import type { BulkWriter } from '@knative-prestart/devcluster/bulk.ts';
import { kubeRequest, statusMessage } from '@knative-prestart/devcluster/kube-request.ts';
import type { KubeConfig } from '@kubernetes/client-node';
import { CANCEL_FINALIZER, HOLD_LABEL, HOOKS_ANNOTATION } from '../api/types.ts';
import { load, table } from './_common.ts';

const PER_CALL_LIMIT = 1_000_000;
const PER_EVALUATION_BUDGET = 10_000_000;
const HOOKS_PATH = '/apis/prestart.dev/v1alpha1/prestarthooks';
const configPath = (file: string) => new URL(`../config/${file}`, import.meta.url).pathname;

export interface CelCostOptions {
  admin: KubeConfig;
  api: BulkWriter;
  namespaces: Record<'none' | 'webhook' | 'apiserver', string>;
  /** How many PrestartHooks exist now. */
  hooks: number;
  /** The apiserver's time per evaluation at that count, ms: 230's stamp (its histogram), 210 (its plugin's time over the hooks). */
  perEvaluation: { map: number; vap: number };
  /** Whether this apiserver evaluates 230's strip policy before its stamp policy (the order of its policy list). */
  stripFirst: boolean;
  revision: (namespace: string, extra?: { labels?: Record<string, string>; finalizers?: string[] }) => object;
  /** Deletes every PrestartHook but one that matches, and waits until both stamps see it. */
  keepOneHook: () => Promise<void>;
}

const TITLES = { none: '(a) no stamp', webhook: '(b) webhook', apiserver: '(c) apiserver' } as const;

interface CostLine {
  case: string;
  policy: string;
  costs: number[];
  ms: number[];
  errors?: string[];
}
type Obj = Record<string, unknown> & { metadata: Record<string, unknown> & { name?: string } };
interface Case {
  label: string;
  object: object;
  namespace: object;
  params: object[];
}

const execFileP = promisify(execFile);

/** Builds stamp-cel-cost.go in a copy of the Kubernetes build module (same versions), once per change of the source. */
async function helper(): Promise<{ path: string } | { skipped: string }> {
  const version = pinnedVersions().KUBERNETES_VERSION ?? '';
  const module = join(cacheDir(), 'build', `kubernetes-${version}`);
  if (!existsSync(join(module, 'go.sum')))
    return { skipped: `no Kubernetes build module at ${module} (devcluster/build-binaries.sh kubernetes)` };
  const dir = join(cacheDir(), 'build', `stamp-cel-cost-${version}`);
  const source = readFileSync(new URL('./stamp-cel-cost.go', import.meta.url), 'utf8');
  const bin = join(dir, 'stamp-cel-cost');
  const built = join(dir, 'built.go.txt');
  if (existsSync(bin) && existsSync(built) && readFileSync(built, 'utf8') === source) return { path: bin };
  mkdirSync(dir, { recursive: true });
  for (const f of ['go.mod', 'go.sum']) writeFileSync(join(dir, f), readFileSync(join(module, f)));
  writeFileSync(join(dir, 'main.go'), source);
  console.log(`building bench/stamp-cel-cost.go against k8s.io/apiserver of Kubernetes ${version} (offline; minutes the first time)...`);
  const started = performance.now();
  try {
    await execFileP('go', ['build', '-trimpath', '-o', `${bin}.tmp`, '.'], {
      cwd: dir,
      env: { ...process.env, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOWORK: 'off' },
      timeout: 15 * 60_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (err) {
    return { skipped: `building it failed: ${String((err as { stderr?: string }).stderr ?? err).slice(0, 500)}` };
  }
  renameSync(`${bin}.tmp`, bin);
  writeFileSync(built, source);
  console.log(`  built in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return { path: bin };
}

function evaluate(bin: string, policies: object[], cases: Case[]): Promise<CostLine[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      out += d;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(
            out
              .trim()
              .split('\n')
              .map((l) => JSON.parse(l) as CostLine),
          )
        : reject(new Error(`stamp-cel-cost exited ${code}`)),
    );
    child.stdin.end(JSON.stringify({ policies, cases }));
  });
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const finalizers = (n: number) => range(n).map((i) => `example.com/finalizer-${String(i).padStart(6, '0')}`);

/** A selector at the CRD's limits (64 matchLabels, 32 expressions of 64 values of 63 characters), all true for `prefix` labels "on". */
function selectorAtLimits(prefix: string): object {
  return {
    matchLabels: Object.fromEntries(range(64).map((i) => [`${prefix}${i}`, 'on'])),
    matchExpressions: range(32).map((i) => ({
      key: `${prefix}${i}`,
      operator: 'NotIn',
      values: range(64).map((v) => `value-${v}-`.padEnd(63, 'x')),
    })),
  };
}
const labelsAt = (prefix: string) => Object.fromEntries(range(64).map((i) => [`${prefix}${i}`, 'on']));
const LIMITS_ANNOTATION = 'bench.example/limits';

function hookAtLimits(name: string, patch: (match: Record<string, unknown>) => void = () => undefined): Obj {
  const match: Record<string, unknown> = {
    annotation: { key: LIMITS_ANNOTATION, value: 'a'.repeat(4096) },
    namespaceSelector: selectorAtLimits('ns-'),
    revisionSelector: selectorAtLimits('rev-'),
  };
  patch(match);
  return {
    apiVersion: 'prestart.dev/v1alpha1',
    kind: 'PrestartHook',
    metadata: { name },
    spec: { match, delivery: { transport: 'http', url: 'http://127.0.0.1:9/' } },
  };
}

/** The object as the first evaluation of 230 leaves it for the later ones (and as 210 sees it): marked, held, stamped. */
function stamped(rev: object, hooks: string[]): Obj {
  const out = structuredClone(rev) as Obj;
  const m = out.metadata as { uid?: string; labels: Record<string, string>; annotations: Record<string, string>; finalizers?: string[] };
  m.uid = 'knative-prestart-stamping';
  m.labels[HOLD_LABEL] = 'true';
  m.annotations[HOOKS_ANNOTATION] = JSON.stringify(hooks);
  m.finalizers = [...(m.finalizers ?? []), CANCEL_FINALIZER];
  return out;
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ');

export async function celCost(o: CelCostOptions): Promise<void> {
  console.log(
    `\nCEL cost of the stamp policies (apiserver's cost units; its limits: ${PER_CALL_LIMIT.toLocaleString('en')} per expression,`,
  );
  console.log(`${PER_EVALUATION_BUDGET.toLocaleString('en')} per evaluation, i.e. per policy and hook; none per request):`);
  await crdLimits(o);
  const built = await helper();
  if ('skipped' in built) {
    console.log(`  per-evaluation costs left out: ${built.skipped}`);
    return;
  }
  const policies = [
    ...parseManifests(readFileSync(configPath('210-stamp-policy.yaml'), 'utf8')),
    ...parseManifests(readFileSync(configPath('230-stamp-mutating-policy.yaml'), 'utf8')),
  ].filter((m) => m.kind.endsWith('Policy'));
  const readNamespace = async (name: string) => (await o.api.send('GET', `/api/v1/namespaces/${name}`)) as object;
  const ns = await readNamespace(o.namespaces.apiserver);
  const hooks = ((await o.api.send('GET', HOOKS_PATH)) as { items: Obj[] }).items;
  const matching = hooks.filter((h) => h.metadata.name === 'db' || h.metadata.name === 'scan').map((h) => h.metadata.name as string);
  const created = o.revision(o.namespaces.apiserver);
  const limitsNs = { metadata: { name: 'limits', labels: { ...labelsAt('ns-'), 'kubernetes.io/metadata.name': 'limits' } } };
  const limitsRev = o.revision('limits', { labels: labelsAt('rev-') }) as Obj;
  (limitsRev.metadata.annotations as Record<string, string>)[LIMITS_ANNOTATION] = 'a'.repeat(4096);
  const limitsHook = hookAtLimits('at-the-limits');
  const lines = await evaluate(built.path, policies, [
    { label: 'created', object: created, namespace: ns, params: hooks },
    { label: 'stamped', object: stamped(created, matching), namespace: ns, params: hooks },
    { label: 'limits created', object: limitsRev, namespace: limitsNs, params: [limitsHook] },
    { label: 'limits stamped', object: stamped(limitsRev, ['at-the-limits']), namespace: limitsNs, params: [limitsHook] },
  ]);
  const celMs = (l: CostLine) => l.ms.reduce((a, b) => a + b, 0) / l.ms.length;
  const line = (c: string, policy: string) => lines.find((l) => l.case === c && l.policy.endsWith(policy)) as CostLine;
  const stats = (l: CostLine) => {
    const sum = l.costs.reduce((a, b) => a + b, 0);
    return [
      String(l.costs.length),
      (sum / l.costs.length).toFixed(0),
      String(Math.max(...l.costs)),
      String(sum),
      celMs(l).toFixed(3),
      l.errors ? `${l.errors.length} errors` : '',
    ];
  };
  const MAP = 'MutatingAdmissionPolicy/prestart-stamp-revisions';
  const VAP = 'ValidatingAdmissionPolicy/prestart-stamp-revisions';
  const STRIP = 'MutatingAdmissionPolicy/prestart-strip-revisions';
  table([
    ['object', 'policy', 'evaluations', 'units mean', 'max', 'sum', 'ms each', ''],
    [`${o.hooks} hooks, Revision as created (230's first evaluation)`, '230 stamp (MAP)', ...stats(line('created', MAP))],
    [`${o.hooks} hooks, Revision as stamped (230's later evaluations)`, '230 stamp (MAP)', ...stats(line('stamped', MAP))],
    [`${o.hooks} hooks, Revision as stamped`, '210 stamp check (VAP)', ...stats(line('stamped', VAP))],
    ['Revision as created', '230 strip (MAP, once)', ...stats(line('created', STRIP))],
    ['hook at the CRD limits, matching Revision, as created', '230 stamp (MAP)', ...stats(line('limits created', MAP))],
    ['hook at the CRD limits, matching Revision, as stamped', '230 stamp (MAP)', ...stats(line('limits stamped', MAP))],
    ['hook at the CRD limits, matching Revision, as stamped', '210 stamp check (VAP)', ...stats(line('limits stamped', VAP))],
  ]);
  // Beyond the expressions, for every hook the MutatingAdmissionPolicy plugin encodes the object
  // to JSON, applies the (often empty) patch, decodes and defaults the result and compares it with
  // the object before (policy/mutating/patch/json_patch.go, dispatcher.go).
  console.log(
    `  ms each: the evaluation alone (bench/stamp-cel-cost.go, one process with nothing else to do). In the apiserver, per evaluation at ${o.hooks} hooks:` +
      ` 230's stamp ${o.perEvaluation.map.toFixed(3)} ms (its histogram), 210 ${o.perEvaluation.vap.toFixed(3)} ms (its plugin's time over the hooks)`,
  );
  const limitsMax = Math.max(...line('limits created', MAP).costs, ...line('limits stamped', VAP).costs);
  console.log(
    `  a hook at the CRD's limits costs at most ${limitsMax} units per evaluation: ${(PER_CALL_LIMIT / limitsMax).toFixed(0)}x under the per-expression limit`,
  );
  await budget(o, built.path, policies, ns, hooks);
}

/** What the CRD refuses: one past each of its limits on a hook's match (dry-run creates). */
async function crdLimits(o: CelCostOptions): Promise<void> {
  const sel = (m: Record<string, unknown>) =>
    m.revisionSelector as { matchLabels: Record<string, string>; matchExpressions: { key: string; operator: string; values: string[] }[] };
  const cases: [string, Obj][] = [
    ['at every limit (64 labels, 32 expressions x 64 values of 63 characters, a 4096-character value)', hookAtLimits('at-the-limits')],
    ['33 matchExpressions', hookAtLimits('over', (m) => sel(m).matchExpressions.push({ key: 'x', operator: 'Exists', values: [] }))],
    ['65 values in one expression', hookAtLimits('over', (m) => sel(m).matchExpressions[0]?.values.push('one-more'))],
    ['65 matchLabels', hookAtLimits('over', (m) => Object.assign(sel(m).matchLabels, { 'rev-64': 'on' }))],
    [
      'an annotation value of 4097 characters',
      hookAtLimits('over', (m) => Object.assign(m, { annotation: { key: LIMITS_ANNOTATION, value: 'a'.repeat(4097) } })),
    ],
  ];
  console.log("What the PrestartHook CRD admits (dry-run creates of a hook whose selectors are at, or one past, the CRD's limits):");
  for (const [what, hook] of cases) {
    const res = await kubeRequest(o.admin, 'POST', `${HOOKS_PATH}?dryRun=All`, hook);
    // The first cause only; the rest is the CEL rules the apiserver skips on an invalid object.
    const cause = statusMessage(res).split(' is invalid: ')[1]?.replace(/^\[/, '').split(', <nil>')[0];
    console.log(`  ${what}: ${res.status < 300 ? 'admitted' : `refused (${cause ?? statusMessage(res)})`}`);
  }
}

/**
 * The per-expression limit, reached through the Revision: the size at which the first evaluation
 * of 230 passes it (from the cost per finalizer, checked with the helper), and dry-run creates of
 * Revisions just under and just over it, sent once each (a retry would double the wait).
 */
async function budget(o: CelCostOptions, bin: string, policies: object[], ns: object, hooks: Obj[]): Promise<void> {
  const stamp = policies.filter(
    (p) => (p as Obj).kind === 'MutatingAdmissionPolicy' && (p as Obj).metadata.name === 'prestart-stamp-revisions',
  );
  const first = async (n: number) => {
    const object = o.revision(o.namespaces.apiserver, { finalizers: finalizers(n) });
    const [line] = (await evaluate(bin, stamp, [{ label: String(n), object, namespace: ns, params: hooks.slice(0, 1) }])) as [CostLine];
    return { n, cost: line.costs[0] ?? 0, ms: line.ms[0] ?? 0, error: line.errors?.[0] };
  };
  const small = [await first(0), await first(5_000), await first(10_000), await first(20_000)];
  const perFinalizer = ((small[3]?.cost ?? 0) - (small[0]?.cost ?? 0)) / 20_000;
  let over = await first(Math.ceil((PER_CALL_LIMIT / perFinalizer) * 1.02));
  // Bounded by the request: 150,000 finalizers are about 4 MiB.
  while (!over.error && over.n < 150_000) over = await first(Math.ceil(over.n * 1.05));
  const under = await first(Math.floor((PER_CALL_LIMIT / perFinalizer) * 0.9));
  console.log(
    `\nThe per-expression limit: 230's stamp walks the Revision's finalizers while the object is not yet marked (no schema bounds them,` +
      ` only the 3 MiB request), ~${perFinalizer.toFixed(1)} units each; the cost grows with their number, the time with its square.` +
      ` One evaluation (the apiserver's code, bench/stamp-cel-cost.go):`,
  );
  table([
    ['finalizers', 'MiB', 'units', 's', 'outcome'],
    ...[...small.slice(1), under, over].map((r) => [
      r.n.toLocaleString('en'),
      (JSON.stringify(finalizers(r.n)).length / 1024 / 1024).toFixed(2),
      String(r.cost),
      (r.ms / 1000).toFixed(2),
      r.error ? (/operation cancelled: [^"]*$/.exec(r.error)?.[0] ?? r.error.slice(-120)) : 'ok',
    ]),
  ]);
  const create = async (n: number, config: keyof CelCostOptions['namespaces'], hooks: number) => {
    const namespace = o.namespaces[config];
    const started = performance.now();
    const res = await kubeRequest(
      o.admin,
      'POST',
      `/apis/serving.knative.dev/v1/namespaces/${namespace}/revisions?dryRun=All`,
      o.revision(namespace, { finalizers: finalizers(n) }),
    );
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const held = ((res.body as Obj).metadata?.labels as Record<string, string> | undefined)?.[HOLD_LABEL] === 'true';
    const message = oneLine(statusMessage(res));
    const short = `${message.slice(0, 110)}${message.length > 110 ? '…' : ''}`;
    const outcome = res.status < 300 ? (held ? 'admitted, held' : 'admitted, not held') : `refused: ${short}`;
    const line = `${n.toLocaleString('en')} finalizers, ${TITLES[config]}, ${hooks} hooks: HTTP ${res.status} after ${seconds} s, ${outcome}`;
    return { line, message, status: res.status };
  };
  console.log(
    `This apiserver evaluates 230's strip policy ${o.stripFirst ? 'before' : 'after'} its stamp (the order of its policy list; the policies do not set it).` +
      ' Strip first marks the object, and the stamp then never walks the finalizers; stamp first walks them once, or once per hook while the limit keeps' +
      ' the object unmarked. Dry-run creates of those Revisions, one try each (the apiserver gives a create 34 s):',
  );
  const results = [];
  for (const [r, config] of [
    [under, 'none'],
    [under, 'apiserver'],
    [over, 'apiserver'],
    [over, 'webhook'],
  ] as const) {
    results.push(await create(r.n, config, o.hooks));
  }
  // With one hook the limit is met once, so its own refusal can come back before the 34 s are up.
  await o.keepOneHook();
  results.push(await create(over.n, 'apiserver', 1));
  for (const r of results) console.log(`  ${r.line}`);
  const refusal = results.find((r) => r.status === 403)?.message;
  if (refusal) {
    console.log(`  the refusal at the limit, ${refusal.length} characters:`);
    console.log(`  ${refusal.length > 3000 ? `${refusal.slice(0, 1500)} … ${refusal.slice(-1500)}` : refusal}`);
  } else {
    console.log(
      "  no create came back with the limit's own refusal before the apiserver's deadline; the evaluation's error, which it wraps:",
    );
    console.log(`  ${oneLine(over.error ?? '')}`);
  }
  console.log(`  ${load()}`);
}
