// The apiserver's stamp (config/230-stamp-mutating-policy.yaml, MutatingAdmissionPolicy) writes the
// same hold label, hooks snapshot and finalizers as the gate's Revision webhook, for a generated
// corpus of Revisions against one set of hooks that uses every match criterion, Audit mode and
// several orders. Real: a fresh kube-apiserver of its own (no other test's hooks), the policies as
// shipped, the validating stamp check (210) as the backstop, Revisions admitted by dry-run creates.
// The webhook's side is its decision function (stampRevision, what gate/webhooks/admission.ts
// answers with) with its JSON patch applied here: the webhook itself is not called.

import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { knativeServingCrdDir } from '@knative-prestart/devcluster/knative.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import { REVISIONS, type RevisionObject, toRevisionView } from '../../../api/resources.ts';
import {
  CANCEL_FINALIZER,
  HOLD_LABEL,
  HOOKS_ANNOTATION,
  INJECT_LABEL,
  type PrestartHook,
  type PrestartHookSpec,
  REASON_ANNOTATION,
} from '../../../api/types.ts';
import { hookMatches, type JsonPatchOp, stampRevision } from '../../../gate/core/index.ts';

const config = (file: string) => new URL(`../../../config/${file}`, import.meta.url).pathname;
const CASES = 520;

const NAMESPACES: Record<string, Record<string, string>> = {
  'corp-gold': { tier: 'gold', team: 'a', env: 'prod' },
  'corp-silver': { tier: 'silver' },
  'corp-plain': {},
  'corp-b': { team: 'b', env: 'dev' },
};
/** Never stamped on either path (the policies' matchConstraints, the webhook configuration's selector). */
const EXCLUDED = 'kube-system';

type Match = PrestartHookSpec['match'];
const HOOK_MATCHES: Record<string, [Match, number, ('Audit' | undefined)?]> = {
  'db-any': [{ annotation: { key: 'corp.example/db' } }, 0],
  'db-postgres': [{ annotation: { key: 'corp.example/db', value: 'postgres' } }, 1],
  'ns-gold': [{ namespaceSelector: { matchLabels: { tier: 'gold' } } }, 2],
  'ns-tier-in': [{ namespaceSelector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['gold', 'silver'] }] } }, 0],
  'ns-team-notin': [{ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'NotIn', values: ['a'] }] } }, 1],
  'ns-env-exists': [{ namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'Exists' }] } }, 0],
  'ns-team-absent': [{ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] } }, 3],
  'rev-shop': [{ revisionSelector: { matchLabels: { app: 'shop' } } }, 0],
  'rev-app-in': [{ revisionSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['shop', 'cart'] }] } }, 2],
  'rev-app-notin': [{ revisionSelector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['shop'] }] } }, 1],
  'rev-migrate': [{ revisionSelector: { matchExpressions: [{ key: 'migrate', operator: 'Exists' }] } }, 0],
  'rev-scan': [{ revisionSelector: { matchExpressions: [{ key: 'skip-scan', operator: 'DoesNotExist' }] } }, 0],
  'audit-shadow': [{ annotation: { key: 'corp.example/audit' } }, 0, 'Audit'],
  'all-of': [
    {
      annotation: { key: 'corp.example/db', value: 'mysql' },
      namespaceSelector: { matchLabels: { env: 'prod' } },
      revisionSelector: { matchLabels: { app: 'cart' }, matchExpressions: [{ key: 'migrate', operator: 'Exists' }] },
    },
    1,
  ],
};

const HOOKS: PrestartHook[] = Object.entries(HOOK_MATCHES).map(([name, [match, order, mode]]) => ({
  name,
  generation: 1,
  spec: {
    match,
    order,
    ...(mode ? { mode } : {}),
    timeout: '2m',
    resendInterval: '30s',
    failurePolicy: 'Fail',
    delivery: { transport: 'http', url: 'http://hooks.example.invalid/' },
  },
}));

/** A small deterministic generator: the corpus is the same in every run, and a failure names its case. */
function generator(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  return {
    chance: (p: number) => next() < p,
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}

interface Case {
  index: number;
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  finalizers?: string[];
}

function corpus(): Case[] {
  const g = generator(2026);
  const cases: Case[] = [];
  const namespaces = [...Object.keys(NAMESPACES), EXCLUDED];
  for (let index = 0; index < CASES; index++) {
    const labels: Record<string, string> = {};
    const annotations: Record<string, string> = {};
    if (g.chance(0.6)) labels.app = g.pick(['shop', 'cart', 'other']);
    if (g.chance(0.3)) labels.migrate = g.pick(['', 'yes']);
    if (g.chance(0.3)) labels['skip-scan'] = 'true';
    if (g.chance(0.5)) annotations['corp.example/db'] = g.pick(['postgres', 'mysql', '']);
    if (g.chance(0.2)) annotations['corp.example/audit'] = 'on';
    // What a tenant's template may forge: every key the stamp owns, in valid and odd forms.
    if (g.chance(0.25)) labels[HOLD_LABEL] = g.pick(['true', 'false']);
    if (g.chance(0.2)) labels[INJECT_LABEL] = 'true';
    if (g.chance(0.25)) annotations[HOOKS_ANNOTATION] = g.pick(['[]', '["forged"]', '["db-any"]', '["rev-shop","forged"]', 'not json']);
    if (g.chance(0.2)) annotations[REASON_ANNOTATION] = 'forged reason';
    let finalizers: string[] | undefined;
    if (g.chance(0.3)) {
      finalizers = g.pick([
        [CANCEL_FINALIZER],
        ['example.com/keep'],
        [CANCEL_FINALIZER, 'example.com/keep'],
        ['example.com/keep', CANCEL_FINALIZER],
      ]);
    }
    cases.push({ index, namespace: g.pick(namespaces), labels, annotations, ...(finalizers ? { finalizers } : {}) });
  }
  return cases;
}

function revisionOf(c: Case): RevisionObject {
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Revision',
    metadata: {
      name: `case-${c.index}`,
      namespace: c.namespace,
      ...(Object.keys(c.labels).length > 0 ? { labels: c.labels } : {}),
      ...(Object.keys(c.annotations).length > 0 ? { annotations: c.annotations } : {}),
      ...(c.finalizers ? { finalizers: c.finalizers } : {}),
    },
    spec: { containers: [{ image: 'dev.local/demo/app:v1', name: 'user-container' }] },
  } as RevisionObject;
}

/** RFC 6902 as the apiserver applies the webhook's patch, for the ops stampRevision writes. */
function applyPatch(obj: RevisionObject, patch: readonly JsonPatchOp[]): RevisionObject {
  const out = structuredClone(obj) as unknown as Record<string, unknown>;
  for (const op of patch) {
    const tokens = op.path
      .split('/')
      .slice(1)
      .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = tokens.pop() as string;
    let parent = out as Record<string, unknown> | unknown[];
    for (const t of tokens) parent = (parent as Record<string, unknown>)[t] as Record<string, unknown>;
    if (Array.isArray(parent)) {
      if (op.op === 'remove') parent.splice(Number(last), 1);
      else if (last === '-') parent.push(op.value);
      else parent.splice(Number(last), op.op === 'add' ? 0 : 1, op.value);
    } else if (op.op === 'remove') delete parent[last];
    else parent[last] = op.value;
  }
  return out as unknown as RevisionObject;
}

/** What both paths decide: the stamped keys of the Revision as admitted. */
function stampOf(obj: RevisionObject) {
  const m = obj.metadata ?? {};
  return { labels: m.labels ?? {}, annotations: m.annotations ?? {}, finalizers: m.finalizers ?? [] };
}

function byWebhook(c: Case): ReturnType<typeof stampOf> {
  const obj = revisionOf(c);
  if (c.namespace === EXCLUDED) return stampOf(obj);
  const { patch } = stampRevision(toRevisionView(obj), NAMESPACES[c.namespace] ?? {}, HOOKS);
  return stampOf(applyPatch(obj, patch));
}

let cluster: Cluster;
let kc: KubeConfig;
let custom: CustomObjectsApi;

const admitted = async (c: Case) =>
  stampOf(
    (await custom.createNamespacedCustomObject({
      ...REVISIONS,
      namespace: c.namespace,
      body: revisionOf(c),
      dryRun: 'All',
    })) as RevisionObject,
  );

test.before(async () => {
  cluster = await startCluster({ progress: (line) => process.stderr.write(`stamp cluster: ${line}\n`) });
  kc = cluster.kubeConfig;
  custom = kc.makeApiClient(CustomObjectsApi);
  await applyManifests(kc, await knativeServingCrdDir());
  for (const file of ['100-prestarthook-crd.yaml', '210-stamp-policy.yaml', '230-stamp-mutating-policy.yaml'])
    await applyManifests(kc, config(file));
  const core = kc.makeApiClient(CoreV1Api);
  for (const [name, labels] of Object.entries(NAMESPACES)) await core.createNamespace({ body: { metadata: { name, labels } } });
  for (const h of HOOKS) {
    await custom.createClusterCustomObject({
      group: 'prestart.dev',
      version: 'v1alpha1',
      plural: 'prestarthooks',
      body: { apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', metadata: { name: h.name }, spec: h.spec },
    });
  }
  // The apiserver's policy caches see a new hook a moment later: wait until each hook stamps a
  // case of the corpus it matches.
  const cases = corpus().filter((c) => c.namespace !== EXCLUDED);
  for (const h of HOOKS) {
    const probe = cases.find((c) => hookMatches(h, toRevisionView(revisionOf(c)), NAMESPACES[c.namespace] ?? {}));
    if (!probe) throw new Error(`the corpus has no case that hook ${h.name} matches`);
    await waitFor(async () => (await admitted(probe).catch(() => undefined))?.annotations[HOOKS_ANNOTATION]?.includes(`"${h.name}"`), {
      timeoutMs: 30_000,
      what: `the apiserver's stamp to see PrestartHook ${h.name}`,
    });
  }
});

test.after.always(async () => {
  await cluster?.stop();
});

test.serial(`the apiserver stamps ${CASES} generated Revisions exactly as the webhook does`, async (t) => {
  const cases = corpus();
  let held = 0;
  let forged = 0;
  const differences: string[] = [];
  for (const c of cases) {
    const want = byWebhook(c);
    const got = await admitted(c);
    if (want.labels[HOLD_LABEL] === 'true') held++;
    if (HOLD_LABEL in c.labels || HOOKS_ANNOTATION in c.annotations || INJECT_LABEL in c.labels || c.finalizers) forged++;
    if (JSON.stringify(got) !== JSON.stringify(want) && !deepEqualMaps(got, want)) {
      differences.push(
        `case ${c.index} in ${c.namespace} ${JSON.stringify(c)}:\n  policy  ${JSON.stringify(got)}\n  webhook ${JSON.stringify(want)}`,
      );
    }
  }
  t.log(`${cases.length} cases: ${held} held, ${forged} with forged keys, ${differences.length} different`);
  t.deepEqual(differences.slice(0, 5), [], `${differences.length} cases differ`);
  // The corpus is only worth its size if it holds both outcomes and many hook sets.
  t.true(held > CASES / 4 && held < CASES - CASES / 10, `held ${held} of ${CASES}`);
  const sets = new Set(cases.map((c) => byWebhook(c).annotations[HOOKS_ANNOTATION] ?? ''));
  t.true(sets.size > 50, `${sets.size} distinct hook sets`);
});

test.serial(
  'what a tenant forges on its template gives way to the real stamp: the hooks that match, the gate’s finalizer once',
  async (t) => {
    const c: Case = {
      index: 9999,
      namespace: 'corp-gold',
      labels: { [HOLD_LABEL]: 'true', [INJECT_LABEL]: 'true', 'skip-scan': 'true' },
      annotations: { [HOOKS_ANNOTATION]: '["forged"]', [REASON_ANNOTATION]: 'x' },
      finalizers: [CANCEL_FINALIZER, 'example.com/keep', CANCEL_FINALIZER],
    };
    const got = await admitted(c);
    // In corp-gold, without an app label: ns-gold, ns-tier-in, ns-env-exists and rev-app-notin; nothing forged kept.
    t.deepEqual(got.annotations, { [HOOKS_ANNOTATION]: '["ns-env-exists","ns-gold","ns-tier-in","rev-app-notin"]' });
    t.deepEqual(got.labels, { [HOLD_LABEL]: 'true', 'skip-scan': 'true' });
    t.deepEqual(got.finalizers, ['example.com/keep', CANCEL_FINALIZER]);
    t.deepEqual(got, byWebhook(c), 'as the webhook stamps it');
  },
);

test.serial('a Revision that comes with more than 64 finalizers is refused, saying why, not evaluated once per hook', async (t) => {
  const c = (n: number): Case => ({
    index: 9000 + n,
    namespace: 'corp-gold',
    labels: {},
    annotations: {},
    finalizers: Array.from({ length: n }, (_, i) => `example.com/f${i}`),
  });
  const most = await admitted(c(64));
  t.is(most.labels[HOLD_LABEL], 'true', '64: stamped and held');
  t.deepEqual(most, byWebhook(c(64)));
  const refusal = await custom
    .createNamespacedCustomObject({ ...REVISIONS, namespace: 'corp-gold', body: revisionOf(c(65)), dryRun: 'All' })
    .then(
      () => 'admitted',
      (err: { body?: unknown }) => String(err.body),
    );
  t.regex(refusal, /matches PrestartHook [a-z-]+ and carries 66 finalizers with the gate's own; at most 65 are stamped/);
  // Tens of thousands, as a tenant may send in one create: refused at once, never admitted unheld.
  const started = Date.now();
  const many = await custom
    .createNamespacedCustomObject({ ...REVISIONS, namespace: 'corp-gold', body: revisionOf(c(50_000)), dryRun: 'All' })
    .then(
      () => 'admitted',
      (err: { body?: unknown }) => String(err.body),
    );
  t.regex(many, /carries 50000 finalizers with the gate's own; at most 65 are stamped/);
  t.log(`50,000 finalizers refused in ${Date.now() - started} ms`);
});

test.serial('a PrestartHook may not match on the keys the stamp writes', async (t) => {
  const refused = async (match: Match) =>
    custom
      .createClusterCustomObject({
        group: 'prestart.dev',
        version: 'v1alpha1',
        plural: 'prestarthooks',
        body: {
          apiVersion: 'prestart.dev/v1alpha1',
          kind: 'PrestartHook',
          metadata: { name: 'reads-the-stamp' },
          spec: { ...HOOKS[0]?.spec, match },
        },
        dryRun: 'All',
      })
      .then(
        () => 'admitted',
        (err: unknown) => String((err as { body?: unknown }).body),
      );
  t.regex(await refused({ annotation: { key: HOOKS_ANNOTATION } }), /may not name prestart.dev\/hooks/);
  t.regex(await refused({ revisionSelector: { matchLabels: { [HOLD_LABEL]: 'true' } } }), /may not select on prestart.dev\/hold/);
  t.regex(
    await refused({ revisionSelector: { matchExpressions: [{ key: INJECT_LABEL, operator: 'Exists' }] } }),
    /may not select on prestart.dev\/hold or prestart.dev\/inject/,
  );
  t.is(await refused({ revisionSelector: { matchLabels: { app: 'shop' } } }), 'admitted', 'control: any other key');
});

// Last: it deletes the hooks the tests above use.
test.serial('with no PrestartHook at all, what a tenant forges is stripped all the same (the parameterless policy)', async (t) => {
  for (const h of HOOKS)
    await custom.deleteClusterCustomObject({ group: 'prestart.dev', version: 'v1alpha1', plural: 'prestarthooks', name: h.name });
  const forged = (index: number, finalizers: string[]): Case => ({
    index,
    namespace: 'corp-plain',
    labels: { [HOLD_LABEL]: 'true', [INJECT_LABEL]: 'true', app: 'shop' },
    annotations: { [HOOKS_ANNOTATION]: '["db-any"]', [REASON_ANNOTATION]: 'x', 'corp.example/db': 'postgres' },
    finalizers,
  });
  // The apiserver's parameter cache lets go of the hooks a moment later.
  const first = await waitFor(
    async () => {
      const got = await admitted(forged(10_000, [CANCEL_FINALIZER]));
      return HOOKS_ANNOTATION in got.annotations ? undefined : got;
    },
    { timeoutMs: 30_000, what: 'the apiserver to stamp with no PrestartHook left' },
  );
  t.deepEqual(first, { labels: { app: 'shop' }, annotations: { 'corp.example/db': 'postgres' }, finalizers: [] });
  for (const [i, finalizers] of [[], ['example.com/keep', CANCEL_FINALIZER], [CANCEL_FINALIZER, 'example.com/keep']].entries()) {
    const c = forged(10_001 + i, finalizers);
    const want = stampRevision(toRevisionView(revisionOf(c)), NAMESPACES['corp-plain'] ?? {}, []);
    t.deepEqual(
      await admitted(c),
      stampOf(applyPatch(revisionOf(c), want.patch)),
      `finalizers ${JSON.stringify(finalizers)}: as the webhook strips`,
    );
  }
});

/** Maps compared without their key order (the apiserver sorts keys; the patched object keeps insertion order). */
function deepEqualMaps(a: ReturnType<typeof stampOf>, b: ReturnType<typeof stampOf>): boolean {
  const sorted = (m: Record<string, string>) => JSON.stringify(Object.entries(m).sort(([x], [y]) => (x < y ? -1 : 1)));
  return (
    sorted(a.labels) === sorted(b.labels) &&
    sorted(a.annotations) === sorted(b.annotations) &&
    JSON.stringify(a.finalizers) === JSON.stringify(b.finalizers)
  );
}
