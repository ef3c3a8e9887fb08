// A team's own hooks (NamespacedPrestartHook), attacked and used by a namespace editor (the
// Kubernetes `edit` ClusterRole, bound in their namespace, nothing else): the apiserver refuses
// every target a team may not send to, with the reason, and stores nothing; a team's hook has no
// effect on another namespace's Revisions; it runs only after the admin's hook and can neither
// release, skip nor answer for it; a namespace with 1,000 hooks is refused with the reason while
// the gate keeps serving another namespace. And the road a team takes: kubectl apply, a Revision
// held after the admin's hook, released when the team's hook answers.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { controlPlaneBinaries } from '@knative-prestart/devcluster/binaries.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply, completedFor, syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld, type RevisionMethods, revisionMethods } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { NAMESPACED_HOOKS, REVISIONS, type RevisionObject } from '../../../api/resources.ts';
import { HOOKS_ANNOTATION } from '../../../api/types.ts';
import { buildCompleted, toBinary } from '../../../schemas/index.ts';
import { DEFAULT_SINK_AUDIENCE } from '../../../sinks/identity.ts';
import { refusal } from '../../support/refusal.ts';

const exec = promisify(execFile);

let env: GateEnv;
/** A second and a third namespace the same gate serves: another team's, and the crowded one. */
let other: { namespace: string; revisions: RevisionMethods };
let crowded: string;
let alice: KubeConfig;
let aliceKubeconfig: string;
let adminHook: string;
let adminServer: HookServer;
let teamServer: HookServer;
/** What the team's hook does with a request; set by each test. */
let teamAnswer: (req: ReceivedRequest) => Promise<{ status: number; headers?: Record<string, string>; body?: string }> = async () => ({
  status: 202,
});
/** What the admin's hook does; default: takes it and answers later (the test does). */
const adminAnswer: typeof teamAnswer = async () => ({ status: 202 });

const V = 'prestart.dev/v1alpha1';
const KIND = 'NamespacedPrestartHook';
/** A stand-in for cluster DNS (the gate runs outside any cluster network): a Service's address, dialled on loopback. */
const serviceDns = (url: URL) =>
  url.hostname.endsWith('.svc.cluster.local') ? new URL(`http://127.0.0.1:${url.port || '80'}${url.pathname}`) : undefined;

async function labelledNamespace(name: string): Promise<void> {
  await env.core.createNamespace({ body: { metadata: { name, labels: { 'prestart.dev/gate': env.instance } } } });
  await waitFor(() => env.gate.inScope(name), { what: `the gate to serve namespace ${name}` });
}

/** A NamespacedPrestartHook as a team writes it: their Service by name, defaults for the rest. */
function teamHook(namespace: string, name: string, spec: Record<string, unknown>): object {
  return { apiVersion: V, kind: KIND, metadata: { name, namespace }, spec: { timeout: '2m', ...spec } };
}

/** Waits until a dry-run Revision carrying `annotations` in `namespace` is stamped with `hook`. */
async function waitStamped(namespace: string, hook: string, annotations: Record<string, string>): Promise<void> {
  const custom = env.admin.makeApiClient(CustomObjectsApi);
  await waitFor(
    async () => {
      const rev = (await custom
        .createNamespacedCustomObject({
          ...REVISIONS,
          namespace,
          dryRun: 'All',
          body: {
            apiVersion: 'serving.knative.dev/v1',
            kind: 'Revision',
            metadata: { name: `stamp-probe-${Date.now()}`, annotations },
            spec: { containers: [{ image: 'dev.local/demo/app:v1' }] },
          },
        })
        .catch(() => undefined)) as RevisionObject | undefined;
      return (JSON.parse(rev?.metadata?.annotations?.[HOOKS_ANNOTATION] ?? '[]') as string[]).includes(hook);
    },
    { timeoutMs: 30_000, what: `new Revisions in ${namespace} to be stamped with ${hook}` },
  );
}

test.before(async () => {
  adminServer = await startHookServer((req) => adminAnswer(req));
  teamServer = await startHookServer((req) => teamAnswer(req));
  // As the release runs it: a hook that names its ServiceAccount is answered only with its token.
  env = await gateEnv('nshooks', { gate: { serviceDns, senderIdentity: { replies: 'declared' } } });
  other = { namespace: `${env.instance}-b`, revisions: revisionMethods(env.admin, `${env.instance}-b`) };
  crowded = `${env.instance}-c`;
  await labelledNamespace(other.namespace);
  await labelledNamespace(crowded);
  // Alice edits the team's namespace: Kubernetes' own `edit` ClusterRole, nothing of ours bound.
  aliceKubeconfig = await env.cluster.mintUserKubeconfig(`${env.instance}-alice`, ['system:authenticated']);
  alice = new KubeConfig();
  alice.loadFromFile(aliceKubeconfig);
  await env.admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: 'alice-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ kind: 'User', name: `${env.instance}-alice`, apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  // The aggregation controller folds our ClusterRole into `edit` a moment after it is applied.
  await waitFor(
    async () =>
      (await refusal(
        alice.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
          ...NAMESPACED_HOOKS,
          namespace: env.namespace,
          dryRun: 'All',
          body: teamHook(env.namespace, 'probe', { match: {}, delivery: { service: { name: 'probe' } } }),
        }),
      )) === undefined,
    { what: 'edit to let a namespace editor create NamespacedPrestartHooks' },
  );
  // The team's hook listens behind their Service (created by Alice, as `edit` allows).
  await alice.makeApiClient(CoreV1Api).createNamespacedService({
    namespace: env.namespace,
    body: {
      metadata: { name: 'migrate' },
      spec: { ports: [{ port: Number(new URL(teamServer.url).port) }], selector: { app: 'migrate' } },
    },
  });
  adminHook = `${env.instance}-scan`;
  await env.createHook(adminHook, {
    match: env.annotationMatch('scan'),
    order: 100,
    delivery: { transport: 'http', url: adminServer.url },
  });
});

test.after.always(async () => {
  await env?.core.deleteNamespace({ name: other?.namespace }).catch(() => undefined);
  await env?.core.deleteNamespace({ name: crowded }).catch(() => undefined);
  await env?.stop();
  await adminServer?.close();
  await teamServer?.close();
});

test.serial('the apiserver refuses every target a team may not send to, saying why, and stores nothing', async (t) => {
  const api = alice.makeApiClient(CustomObjectsApi);
  const apiserver = new URL(env.admin.getCurrentCluster()?.server ?? '');
  const service = { service: { name: 'migrate' } };
  const attempts: Array<[string, Record<string, unknown>, RegExp]> = [
    [
      'a URL to 127.0.0.1',
      { delivery: { url: 'http://127.0.0.1:8080/' } },
      /delivery\.url: a NamespacedPrestartHook may not send to a URL/,
    ],
    ['the metadata address', { delivery: { url: 'http://169.254.169.254/latest/meta-data/' } }, /may not send to a URL/],
    ['the apiserver by name', { delivery: { url: 'https://kubernetes.default.svc/api' } }, /may not send to a URL/],
    ['the apiserver by address', { delivery: { url: `https://${apiserver.host}/api` } }, /may not send to a URL/],
    ['a URL beside a Service', { delivery: { url: 'http://127.0.0.1/', ...service } }, /may not send to a URL/],
    [
      "another namespace's Service",
      { delivery: { service: { name: 'db', namespace: other.namespace } } },
      /delivery\.service\.namespace: a NamespacedPrestartHook reaches only the Services of its own namespace/,
    ],
    [
      "another namespace's Knative Service",
      { delivery: { knativeService: { name: 'db', namespace: other.namespace } } },
      /delivery\.knativeService\.namespace: .* own namespace/,
    ],
    [
      'a dotted Service name (kubernetes.default)',
      { delivery: { service: { name: 'kubernetes.default' } } },
      /spec\.delivery\.service\.name/,
    ],
    [
      'NATS',
      { delivery: { transport: 'nats', nats: { subject: 'prestart.requests.x' } } },
      /a Broker or NATS is for an admin's PrestartHook/,
    ],
    ['a Broker', { delivery: { transport: 'broker', broker: { name: 'default' } } }, /a Broker or NATS is for an admin's PrestartHook/],
    [
      "another namespace's ServiceAccount",
      { delivery: service, identity: { serviceAccount: { name: 'default', namespace: 'kube-system' } } },
      /identity\.serviceAccount\.namespace: the hook answers as a ServiceAccount of its own namespace/,
    ],
    [
      "the gate's token",
      { delivery: service, identity: { audience: apiserver.href } },
      /identity\.audience: the gate sends its own ServiceAccount token only/,
    ],
    [
      'other namespaces',
      { delivery: service, match: { namespaceSelector: {} } },
      /match\.namespaceSelector: a NamespacedPrestartHook applies only to the Revisions of its own namespace/,
    ],
  ];
  for (const [what, spec, reason] of attempts) {
    const refused = await refusal(
      api.createNamespacedCustomObject({
        ...NAMESPACED_HOOKS,
        namespace: env.namespace,
        body: teamHook(env.namespace, 'attack', { match: {}, ...spec }),
      }),
    );
    t.is(refused?.code, 422, what);
    t.regex(refused?.message ?? '', reason, what);
  }
  // What Alice sees with kubectl: the reason, and nothing created.
  const dir = await mkdtemp(join(tmpdir(), 'nshooks-'));
  try {
    const file = join(dir, 'hook.yaml');
    await writeFile(file, JSON.stringify(teamHook(env.namespace, 'attack', { match: {}, delivery: { url: 'http://169.254.169.254/' } })));
    const kubectl = exec(controlPlaneBinaries().kubectl, ['--kubeconfig', aliceKubeconfig, 'apply', '-f', file]);
    const err = (await kubectl.then(
      () => undefined,
      (e: { stderr?: string }) => e,
    )) as { stderr?: string } | undefined;
    t.regex(err?.stderr ?? 'kubectl accepted it', /delivery\.url: a NamespacedPrestartHook may not send to a URL/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const stored = (await api.listNamespacedCustomObject({ ...NAMESPACED_HOOKS, namespace: env.namespace })) as { items: unknown[] };
  t.deepEqual(stored.items, [], 'no hook was stored');
});

test.serial("a namespace editor's hook holds their Revision after the admin's hook, and its answer releases it", async (t) => {
  // Alice, with kubectl, as a team would.
  const dir = await mkdtemp(join(tmpdir(), 'nshooks-'));
  const port = Number(new URL(teamServer.url).port);
  try {
    const file = join(dir, 'hook.yaml');
    await writeFile(
      file,
      [
        `apiVersion: ${V}`,
        `kind: ${KIND}`,
        'metadata: { name: migrate }',
        'spec:',
        '  match: { annotation: { key: migrate } }',
        `  delivery: { service: { name: migrate, port: ${port}, path: /prestart } }`,
        '  timeout: 2m',
      ].join('\n'),
    );
    const applied = await exec(controlPlaneBinaries().kubectl, ['--kubeconfig', aliceKubeconfig, '-n', env.namespace, 'apply', '-f', file]);
    t.regex(applied.stdout, /namespacedprestarthook\.prestart\.dev\/migrate created/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const teamHookName = `${env.namespace}/migrate`;
  await waitStamped(env.namespace, teamHookName, { scan: 'yes', migrate: 'yes' });

  const sentToTeam: ReceivedRequest[] = [];
  teamAnswer = async (req) => {
    sentToTeam.push(req);
    return syncReply(req, 'succeeded');
  };
  await env.createRevision('web-00001', { annotations: { scan: 'yes', migrate: 'yes' } });
  const rev = await env.getRevision('web-00001');
  t.true(isHeld(rev));
  t.deepEqual(JSON.parse(rev.metadata?.annotations?.[HOOKS_ANNOTATION] ?? '[]'), [adminHook, teamHookName].sort());
  const adminReq = await waitFor(() => adminServer.requests.find((r) => r.data.revision.name === 'web-00001'), {
    what: "the admin's hook to be asked",
  });
  const run1 = await env.waitForRun(
    'web-00001',
    "admin's hook asked",
    (r) => r.status?.hooks.some((h) => h.phase === 'Requested') === true,
  );
  t.deepEqual(
    run1.status?.hooks.map((h) => [h.name, h.phase]),
    [
      [adminHook, 'Requested'],
      [teamHookName, 'Pending'],
    ],
    "the team's hook waits for the admin's",
  );
  t.deepEqual(sentToTeam, [], "the team's hook is not asked before the admin's has passed");

  t.is((await asyncReply(adminReq, 'succeeded')).status, 202);
  const released = await env.waitReleased('web-00001');
  t.false(isHeld(released));
  t.is(sentToTeam.length, 1);
  t.is(sentToTeam[0]?.data.hook.name, teamHookName);
  // The release goes first, the run's status right after it.
  const run = await env.waitForRun('web-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.deepEqual(
    run.spec.hooks.map((h) => [h.name, h.delivery.url]),
    [
      [adminHook, adminServer.url],
      [teamHookName, `http://migrate.${env.namespace}.svc.cluster.local:${port}/prestart`],
    ],
    "the run records the team's Service address the gate resolved",
  );
});

test.serial("a team's hook cannot release, skip or answer for the admin's hook", async (t) => {
  const teamHookName = `${env.namespace}/migrate`;
  // The team's hook as lenient as it gets: order 0 and failurePolicy Ignore (the admin's is order 100, Fail).
  await env.custom.patchNamespacedCustomObject({
    ...NAMESPACED_HOOKS,
    namespace: env.namespace,
    name: 'migrate',
    body: [{ op: 'add', path: '/spec/failurePolicy', value: 'Ignore' }],
  });
  const harvested: ReceivedRequest[] = [];
  teamAnswer = async (req) => {
    harvested.push(req);
    return { status: 202 };
  };
  // A first Revision: the team's hook gets a request, and keeps its reply id.
  await env.createRevision('web-00002', { annotations: { scan: 'yes', migrate: 'yes' } });
  const admin2 = await waitFor(() => adminServer.requests.find((r) => r.data.revision.name === 'web-00002'), { what: 'admin asked' });
  await asyncReply(admin2, 'succeeded');
  const teamReq = await waitFor(() => harvested.find((r) => r.data.revision.name === 'web-00002'), { what: "the team's hook asked" });

  // A second Revision, the admin's hook still working: the team answers "succeeded" for it with the
  // reply id it harvested, and with its own request's id but the admin hook's name.
  await env.createRevision('web-00003', { annotations: { scan: 'yes', migrate: 'yes' } });
  const admin3 = await waitFor(() => adminServer.requests.find((r) => r.data.revision.name === 'web-00003'), { what: 'admin asked' });
  // A reply id the gate signed names its run and hook: a harvested one cannot stand for another hook.
  const forged = toBinary(
    buildCompleted({
      request: { correlationid: teamReq.correlationid, hook: adminHook, attempt: 1 },
      outcome: 'succeeded',
      source: '/team',
    }),
  );
  const answer = await fetch(admin3.data.replyTo ?? '', { method: 'POST', headers: forged.headers, body: forged.body });
  t.is(answer.status, 422, 'the sink refuses it: prestarthook contradicts the replyid (hook-mismatch)');
  const run3 = await env.waitForRun('web-00003', 'admin requested', (r) => r.status?.hooks.some((h) => h.name === adminHook) === true);
  t.deepEqual(
    run3.status?.hooks.map((h) => [h.name, h.phase]),
    [
      [adminHook, 'Requested'],
      [teamHookName, 'Pending'],
    ],
    "nothing the team sent moved the admin's hook",
  );
  t.true(isHeld(await env.getRevision('web-00003')));

  // The admin's hook fails: the team's Ignore hook is never asked, and the Revision stays held.
  t.is((await asyncReply(admin3, 'failed', { message: 'image has a critical CVE' })).status, 202);
  const failed = await env.waitForRun('web-00003', 'Failed', (r) => r.status?.phase === 'Failed');
  t.deepEqual(
    failed.status?.hooks.map((h) => [h.name, h.phase]),
    [
      [adminHook, 'Failed'],
      [teamHookName, 'Pending'],
    ],
  );
  t.false(
    harvested.some((r) => r.data.revision.name === 'web-00003'),
    "the team's hook was never asked",
  );
  t.true(isHeld(await env.getRevision('web-00003')));
});

test.serial("a team's hook has no effect on another namespace's Revisions, whether it matches or is written on them", async (t) => {
  await alice.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...NAMESPACED_HOOKS,
    namespace: env.namespace,
    body: teamHook(env.namespace, 'everything', { match: {}, delivery: { service: { name: 'migrate' } } }),
  });
  const everything = `${env.namespace}/everything`;
  await waitStamped(env.namespace, everything, {});
  // Alice may not create one in the other namespace at all.
  const there = await refusal(
    alice.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...NAMESPACED_HOOKS,
      namespace: other.namespace,
      body: teamHook(other.namespace, 'reach', { match: {}, delivery: { service: { name: 'migrate' } } }),
    }),
  );
  t.is(there?.code, 403);
  // A Revision of the other namespace that her hook would match, and one that names it itself.
  await other.revisions.createRevision('api-00001', {});
  await other.revisions.createRevision('api-00002', {
    annotations: { [HOOKS_ANNOTATION]: JSON.stringify([everything]) },
    labels: { 'prestart.dev/hold': 'true' },
  });
  for (const name of ['api-00001', 'api-00002']) {
    const rev = await other.revisions.getRevision(name);
    t.false(isHeld(rev), `${name} is not held`);
    t.is(rev.metadata?.annotations?.[HOOKS_ANNOTATION], undefined, `${name} names no hook`);
    t.is(await other.revisions.getRun(name), undefined, `${name} has no run`);
  }
  await env.custom.deleteNamespacedCustomObject({ ...NAMESPACED_HOOKS, namespace: env.namespace, name: 'everything' });
});

test.serial("a team's hook is answered only with its own namespace's ServiceAccount, not a namesake elsewhere", async (t) => {
  // The same ServiceAccount name in both namespaces: the hook names only the name, the gate its namespace.
  for (const namespace of [env.namespace, other.namespace]) {
    await env.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'migrator' } } });
  }
  await alice.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...NAMESPACED_HOOKS,
    namespace: env.namespace,
    body: teamHook(env.namespace, 'ident', {
      match: { annotation: { key: 'ident' } },
      identity: { serviceAccount: { name: 'migrator' } },
      delivery: { service: { name: 'migrate', port: Number(new URL(teamServer.url).port) } },
    }),
  });
  await waitStamped(env.namespace, `${env.namespace}/ident`, { ident: 'yes' });
  const asked: ReceivedRequest[] = [];
  teamAnswer = async (req) => {
    asked.push(req);
    return { status: 202 };
  };
  await env.createRevision('ident-00001', { annotations: { ident: 'yes' } });
  const request = await waitFor(() => asked.find((r) => r.data.revision.name === 'ident-00001'), { what: "the team's hook asked" });
  const reply = async (namespace: string) => {
    const token = (
      await env.core.createNamespacedServiceAccountToken({
        namespace,
        name: 'migrator',
        body: { spec: { audiences: [DEFAULT_SINK_AUDIENCE], expirationSeconds: 600 } },
      })
    ).status?.token;
    const msg = toBinary(completedFor(request, 'succeeded'));
    return fetch(request.data.replyTo ?? '', {
      method: 'POST',
      headers: { ...msg.headers, authorization: `Bearer ${token}` },
      body: msg.body,
    });
  };
  const namesake = await reply(other.namespace);
  t.is(namesake.status, 403, "another namespace's migrator is refused");
  t.regex(((await namesake.json()) as { error: string }).error, new RegExp(`system:serviceaccount:${env.namespace}:migrator`));
  t.true(isHeld(await env.getRevision('ident-00001')));
  t.is((await reply(env.namespace)).status, 202, "the team's own migrator is taken");
  t.false(isHeld(await env.waitReleased('ident-00001')));
});

test.serial(
  "a team's Service of type ExternalName (leading to another namespace) is refused by the gate before anything is sent",
  async (t) => {
    // Alice points a Service of her own namespace at another namespace's Service, and her hook at it.
    await alice.makeApiClient(CoreV1Api).createNamespacedService({
      namespace: env.namespace,
      body: { metadata: { name: 'sneaky' }, spec: { type: 'ExternalName', externalName: `db.${other.namespace}.svc.cluster.local` } },
    });
    await alice.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...NAMESPACED_HOOKS,
      namespace: env.namespace,
      body: teamHook(env.namespace, 'sneaky', {
        match: { annotation: { key: 'sneaky' } },
        delivery: { service: { name: 'sneaky', port: Number(new URL(teamServer.url).port) } },
      }),
    });
    await waitStamped(env.namespace, `${env.namespace}/sneaky`, { sneaky: 'yes' });
    const before = teamServer.requests.length;
    await env.createRevision('sneaky-00001', { annotations: { sneaky: 'yes' } });
    const failed = await env.waitForRun('sneaky-00001', 'Failed', (r) => r.status?.phase === 'Failed');
    t.regex(
      failed.status?.hooks[0]?.message ?? '',
      new RegExp(`Service ${env.namespace}/sneaky is of type ExternalName, which names another address.*nothing was sent`),
    );
    t.is(teamServer.requests.length, before, 'no request went anywhere');
    t.true(isHeld(await env.getRevision('sneaky-00001')));
  },
);

test.serial(
  "an ExternalName Service dressed as Knative's own (controlled by a Route of its name) that leads elsewhere is never sent to",
  async (t) => {
    // All of it is what a namespace editor may write: a Route, a Service naming the Route as its
    // controller, the hook. Only a KIngress of that name (which only Knative writes) could say
    // where Knative's own Service for a Knative Service leads; there is none, so nothing goes.
    const { namespace } = env;
    const route = (await env.custom.createNamespacedCustomObject({
      group: 'serving.knative.dev',
      version: 'v1',
      plural: 'routes',
      namespace,
      body: { apiVersion: 'serving.knative.dev/v1', kind: 'Route', metadata: { name: 'posing' }, spec: {} },
    })) as { metadata: { uid: string } };
    await alice.makeApiClient(CoreV1Api).createNamespacedService({
      namespace,
      body: {
        metadata: {
          name: 'posing',
          ownerReferences: [
            { apiVersion: 'serving.knative.dev/v1', kind: 'Route', name: 'posing', uid: route.metadata.uid, controller: true },
          ],
        },
        spec: { type: 'ExternalName', externalName: `db.${other.namespace}.svc.cluster.local` },
      },
    });
    await alice.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...NAMESPACED_HOOKS,
      namespace,
      body: teamHook(namespace, 'posing', {
        match: { annotation: { key: 'posing' } },
        delivery: { knativeService: { name: 'posing' } },
        timeout: '6s',
        resendInterval: '2s',
      }),
    });
    await waitStamped(namespace, `${namespace}/posing`, { posing: 'yes' });
    const before = teamServer.requests.length;
    await env.createRevision('posing-00001', { annotations: { posing: 'yes' } });
    // Knative's own would lead to the local gateway once its ingress is ready: the gate asks again
    // until the hook's timeout rather than fail it at once, and sends nothing meanwhile.
    const timedOut = await env.waitForRun('posing-00001', 'Failed', (r) => r.status?.phase === 'Failed');
    t.is(timedOut.status?.hooks[0]?.phase, 'TimedOut');
    const refusal = new RegExp(
      `Service ${namespace}/posing is of type ExternalName, which names another address \\("db\\.${other.namespace}\\.svc\\.cluster\\.local", not the local gateway`,
    );
    const said = env.gateLog.map((line) => JSON.parse(line) as { hook?: string; err?: unknown });
    t.true(
      said.some((e) => e.hook === `${namespace}/posing` && refusal.test(String(e.err))),
      'the gate says why it sent nothing',
    );
    t.is(teamServer.requests.length, before, 'no request went anywhere');
    t.true(isHeld(await env.getRevision('posing-00001')));
  },
);

test.serial(
  '1,000 hooks in one namespace: its Revisions are refused with the reason, and another namespace is served as before',
  async (t) => {
    // Another team with one hook of its own, answered at once: the Revision the gate must keep serving.
    await env.custom.createNamespacedCustomObject({
      ...NAMESPACED_HOOKS,
      namespace: other.namespace,
      body: teamHook(other.namespace, 'quick', {
        match: { annotation: { key: 'quick' } },
        delivery: { service: { name: 'quick', port: Number(new URL(teamServer.url).port) } },
      }),
    });
    await env.core.createNamespacedService({
      namespace: other.namespace,
      body: { metadata: { name: 'quick' }, spec: { ports: [{ port: Number(new URL(teamServer.url).port) }], selector: { app: 'quick' } } },
    });
    teamAnswer = async (req) => syncReply(req, 'succeeded');
    await waitStamped(other.namespace, `${other.namespace}/quick`, { quick: 'yes' });
    const timeRelease = async (name: string) => {
      const t0 = performance.now();
      await other.revisions.createRevision(name, { annotations: { quick: 'yes' } });
      await other.revisions.waitReleased(name);
      return Math.round(performance.now() - t0);
    };
    const before = [await timeRelease('quick-00001'), await timeRelease('quick-00002'), await timeRelease('quick-00003')];

    const created0 = performance.now();
    const total = 1000;
    for (let i = 0; i < total; i += 25) {
      await Promise.all(
        Array.from({ length: Math.min(25, total - i) }, (_, j) =>
          env.custom.createNamespacedCustomObject({
            ...NAMESPACED_HOOKS,
            namespace: crowded,
            body: teamHook(crowded, `h${String(i + j).padStart(4, '0')}`, { match: {}, delivery: { service: { name: 'svc' } } }),
          }),
        ),
      );
    }
    const createdMs = Math.round(performance.now() - created0);
    // Once the gate has seen them all, a Revision of that namespace is refused, saying why.
    const refused = await waitFor(
      async () => {
        const r = await refusal(revisionMethods(env.admin, crowded).createRevision('busy-00001', {}));
        return r?.message.includes('(--namespaced-hook-limit)') ? r : undefined;
      },
      { timeoutMs: 60_000, what: 'the crowded namespace to be refused' },
    );
    t.is(refused.code, 403);
    t.regex(refused.message, new RegExp(`namespace ${crowded} has ${total} NamespacedPrestartHooks, more than this gate's limit of 20`));
    t.regex(refused.message, /Nothing was created/);

    const after = [await timeRelease('quick-00004'), await timeRelease('quick-00005'), await timeRelease('quick-00006')];
    t.log(
      `created ${total} hooks in ${createdMs} ms; create-to-release in another namespace: before ${before.join(', ')} ms, after ${after.join(', ')} ms`,
    );
    // Responsive: each still within a few seconds (the work per Revision is its own namespace's hooks).
    for (const ms of after) t.true(ms < 5_000, `released in ${ms} ms`);
  },
);

test.serial("while no gate replica answers, a Revision a team's hook matches is refused, never admitted without it", async (t) => {
  await env.gate.stop();
  t.teardown(() => env.startGate());
  // Once nothing answers the webhook (failurePolicy Ignore), prestart-stamp-revisions-namespaced decides.
  const refused = await waitFor(
    async () => {
      const r = await refusal(env.createRevision(`outage-${Date.now()}-00001`, { annotations: { migrate: 'yes' } }));
      return r?.message.includes('was not held for it') ? r : undefined;
    },
    { what: 'a create to be refused by the namespaced stamp policy' },
  );
  t.is(refused.code, 403);
  t.regex(refused.message, new RegExp(`matches NamespacedPrestartHook ${env.namespace}/migrate but was not held for it`));
  // Nor can a template name a team hook that does not match it (held), to get its work: the
  // apiserver's stamp strips the forged keys where it runs, the policy refuses them where it does not.
  const forged = env.createRevision('forged-00001', {
    labels: { 'prestart.dev/hold': 'true' },
    annotations: { [HOOKS_ANNOTATION]: JSON.stringify([`${env.namespace}/ident`]) },
  });
  const why = await refusal(forged);
  if (why) {
    t.regex(
      why.message,
      new RegExp(`names NamespacedPrestartHook ${env.namespace}/ident in its prestart.dev/hooks annotation, but that hook does not apply`),
    );
  } else {
    const admitted = await env.getRevision('forged-00001');
    t.false(isHeld(admitted), 'admitted unheld');
    t.is(admitted.metadata?.annotations?.[HOOKS_ANNOTATION], undefined, 'without the forged snapshot');
  }
});
