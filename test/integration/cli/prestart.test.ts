// `kn prestart list | why | retry | release --force` against the real local control plane and a
// gate: what a person reads about a held Revision, the retry that re-runs its failed hook, the
// audited break glass that only a cluster-wide grant of the verb force-release may use, and the
// flags kn and kubectl users type by habit (-A, -o json|yaml, --as, --as-group).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { servesMutatingPolicies } from '@knative-prestart/devcluster/apply.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CustomObjectsApi, KubeConfig, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import { Command } from 'commander';
import yaml from 'js-yaml';
import { RUNS } from '../../../api/resources.ts';
import { FORCE_RELEASE_ANNOTATION, FORCE_RELEASE_BY_ANNOTATION, PRESTART_CONDITION } from '../../../api/types.ts';
import { registerPrestartCommands } from '../../../cli/prestart/commands.ts';

let env: GateEnv;
let hookServer: HookServer;
let hookName: string;
let tenantConfig: string;
let breakGlassConfig: string;
const KEY = 'cli-check';

test.before(async () => {
  env = await gateEnv('cli');
  // Attempt 1 fails, a retried attempt succeeds.
  hookServer = await startHookServer(async (req) =>
    req.data.attempt === 1 ? syncReply(req, 'failed', { message: 'quota exceeded' }) : syncReply(req, 'succeeded', { message: 'fixed' }),
  );
  hookName = `${env.instance}-check`;
  await env.createHook(hookName, {
    match: env.annotationMatch(KEY, 'yes'),
    timeout: '10m',
    delivery: { transport: 'http', url: hookServer.url },
  });
  await env.waitUntilStamped(hookName, { [KEY]: 'yes' });

  const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  // A namespace owner: every verb on the project's resources, in their namespace only.
  await rbac.createNamespacedRole({
    namespace: env.namespace,
    body: { metadata: { name: 'owner' }, rules: [{ apiGroups: ['prestart.dev'], resources: ['*'], verbs: ['*'] }] },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: 'owner' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'owner' },
      subjects: [{ kind: 'User', name: `${env.instance}-tenant`, apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  // The on-call admin: the break-glass ClusterRole of config/300-rbac.yaml, bound cluster-wide.
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${env.instance}-break-glass` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-break-glass' },
      subjects: [{ kind: 'User', name: `${env.instance}-oncall`, apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  tenantConfig = await env.cluster.mintUserKubeconfig(`${env.instance}-tenant`, ['system:authenticated']);
  breakGlassConfig = await env.cluster.mintUserKubeconfig(`${env.instance}-oncall`, ['system:authenticated']);
});

test.after.always(async () => {
  await env?.admin
    .makeApiClient(RbacAuthorizationV1Api)
    .deleteClusterRoleBinding({ name: `${env.instance}-break-glass` })
    .catch(() => undefined);
  await hookServer?.close();
  await env?.stop();
});

/** `kn prestart <args>` in this process, as the user of `kubeconfig` (default the admin). */
async function prestart(args: string[], kubeconfig = env.cluster.kubeconfigPath): Promise<{ out: string; code: number }> {
  let out = '';
  let code = 0;
  const program = new Command('knative-prestart').exitOverride();
  registerPrestartCommands(program, {
    out: (text) => {
      out += `${text}\n`;
    },
    setExitCode: (c) => {
      code = c;
    },
    now: () => new Date(),
  });
  await program.parseAsync(['node', 'knative-prestart', ...args, '--kubeconfig', kubeconfig]);
  return { out, code };
}

async function failedRevision(name: string): Promise<void> {
  await env.createRevision(name, { annotations: { [KEY]: 'yes' } });
  await env.waitForRun(name, 'Failed', (r) => r.status?.phase === 'Failed');
}

test.serial('list and why say which hook holds the Revision and how to retry; retry re-runs it and the Revision starts', async (t) => {
  await failedRevision('retry-00001');
  const list = await prestart(['list', '-A']);
  t.is(list.code, 0);
  t.regex(list.out, new RegExp(`^${env.namespace} +retry-00001 +Failed +0/1 +\\S+ +${hookName} Failed: quota exceeded$`, 'm'));

  const why = await prestart(['why', 'retry-00001', '-n', env.namespace]);
  t.is(
    why.out.trim(),
    `Revision retry-00001 in ${env.namespace} is held because hook ${hookName} failed: quota exceeded (attempt 1). Fix the cause, then re-run the failed hooks with: kn prestart retry retry-00001 -n ${env.namespace} (or: kubectl annotate prestartrun retry-00001 -n ${env.namespace} prestart.dev/retry=<new value> --overwrite).`,
  );
  const get = await prestart(['get', 'retry-00001', '-n', env.namespace]);
  t.regex(get.out, new RegExp(`└── ✖ ${hookName}  Failed  attempt 1\\n +quota exceeded`));

  // The gate's condition on the Revision says the same, with the retry command (written in the
  // background, a second after the state it shows).
  const reason = await waitFor(
    async () => {
      const rev = (await env.getRevision('retry-00001')) as { status?: { conditions?: Array<{ type: string; reason?: string }> } };
      const said = rev.status?.conditions?.find((c) => c.type === PRESTART_CONDITION)?.reason;
      return said?.includes('quota exceeded') ? said : undefined;
    },
    { timeoutMs: 15_000, what: "the gate's condition on retry-00001" },
  );
  t.regex(reason, /quota exceeded; retry: kn prestart retry retry-00001/);

  // The namespace owner may retry (the retry annotation is theirs to set).
  const retry = await prestart(['retry', 'retry-00001', '-n', env.namespace], tenantConfig);
  t.is(retry.code, 0, retry.out);
  await env.waitReleased('retry-00001');
  const run = await env.waitForRun('retry-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.like(run.status?.hooks[0], { phase: 'Succeeded', attempt: 2, message: 'fixed' });
  const again = await prestart(['retry', 'retry-00001', '-n', env.namespace]);
  t.is(again.code, 1);
  t.regex(again.out, /has no failed hook to retry \(its run is Released\)/);
});

test.serial(
  'release --force: refused without the cluster-wide verb, with a clear message; with it, recorded in the run, an Event and the request',
  async (t) => {
    await failedRevision('glass-00001');
    const noReason = await prestart(['release', 'glass-00001', '-n', env.namespace, '--force'], breakGlassConfig);
    t.is(noReason.code, 1);
    t.regex(noReason.out, /say why with --reason TEXT/);

    // The namespace owner has every verb on prestart.dev in their namespace, but no cluster-wide force-release.
    const refused = await waitFor(
      async () => {
        const r = await prestart(['release', 'glass-00001', '-n', env.namespace, '--force', '--reason', 'ship it'], tenantConfig);
        return r.out.includes('may not force-release') ? r : undefined;
      },
      { what: 'the policy prestart-force-release to be in force' },
    );
    t.is(refused.code, 1);
    t.regex(
      refused.out,
      new RegExp(
        `error: not allowed: .*knative-prestart: ${env.instance}-tenant may not force-release Revision glass-00001 in ${env.namespace}: that needs the verb force-release on prestartruns.prestart.dev granted cluster-wide`,
      ),
    );
    t.true(isHeld(await env.getRevision('glass-00001')));

    // A forged "by" is refused even for the on-call admin.
    const oncall = new KubeConfig();
    oncall.loadFromFile(breakGlassConfig);
    const forged = await oncall
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject(
        {
          group: RUNS.group,
          version: RUNS.version,
          plural: RUNS.plural,
          namespace: env.namespace,
          name: 'glass-00001',
          body: { metadata: { annotations: { [FORCE_RELEASE_ANNOTATION]: 'x', [FORCE_RELEASE_BY_ANNOTATION]: 'someone-else' } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .then(
        () => 'accepted',
        (err: { code?: number; body?: string }) => `${err.code} ${err.body ?? ''}`,
      );
    t.regex(forged, /^4\d\d .*prestart.dev\/force-release-by set to /);

    const released = await prestart(
      ['release', 'glass-00001', '-n', env.namespace, '--force', '--reason', 'INC-42: check is broken'],
      breakGlassConfig,
    );
    t.is(released.code, 0, released.out);
    await env.waitReleased('glass-00001');
    const run = await env.waitForRun('glass-00001', 'Released', (r) => r.status?.phase === 'Released');
    t.like(run.status?.forcedRelease, { reason: 'INC-42: check is broken', by: `${env.instance}-oncall` });
    t.is(
      run.metadata?.annotations?.[FORCE_RELEASE_ANNOTATION],
      'INC-42: check is broken',
      'the request (and so the audit log) carries the reason',
    );
    const events = await waitFor(
      async () => {
        const list = await env.revisionEvents('glass-00001');
        return list.find((e) => e.reason === 'ForceReleased');
      },
      { what: 'the ForceReleased event' },
    );
    t.is(events.type, 'Warning');
    t.is(events.message, `released without its hooks, force-released by ${env.instance}-oncall: INC-42: check is broken`);
    const why = await prestart(['why', 'glass-00001', '-n', env.namespace]);
    t.regex(why.out, /is not held: it was released at .* \(force-released by .*-oncall: INC-42: check is broken\)/);
  },
);

test.serial('kubectl habits: -n and -A, -o json|yaml, --as and --as-group act as another user', async (t) => {
  await failedRevision('habits-00001');
  const row = new RegExp(`^${env.namespace} +habits-00001 +Failed `, 'm');
  // kn's default is the context's namespace (default here); -n names one, -A takes them all.
  const inDefault = await prestart(['list']);
  t.is(inDefault.code, 0);
  t.notRegex(inDefault.out, row);
  t.regex(inDefault.out, /^No held or recent PrestartRuns in default \(-A: every namespace\)\.$/m);
  t.regex((await prestart(['list', '-n', env.namespace])).out, row);
  t.regex((await prestart(['list', '--all-namespaces'])).out, row);
  const both = await prestart(['list', '-A', '-n', env.namespace]);
  t.is(both.code, 1);
  t.regex(both.out, /give -n NAMESPACE or -A, not both/);

  // -o json|yaml: the objects as the apiserver has them (no managedFields), for jq and scripts.
  const json = await prestart(['list', '-A', '-o', 'json']);
  t.is(json.code, 0, json.out);
  const listed = JSON.parse(json.out) as { kind: string; items: Array<{ metadata: { name: string; managedFields?: unknown } }> };
  t.is(listed.kind, 'List');
  const item = listed.items.find((i) => i.metadata.name === 'habits-00001');
  t.truthy(item, 'the run is in the JSON list');
  t.is(item?.metadata.managedFields, undefined);
  const got = yaml.load((await prestart(['get', 'habits-00001', '-n', env.namespace, '-o', 'yaml'])).out) as {
    kind: string;
    status: { phase: string; hooks: Array<{ name: string; message: string }> };
  };
  t.is(got.kind, 'PrestartRun');
  t.like(got.status, { phase: 'Failed' });
  t.like(got.status.hooks[0], { name: hookName, message: 'quota exceeded' });
  // Commander refuses it while parsing (the CLI prints the line and exits 1).
  await t.throwsAsync(prestart(['get', 'habits-00001', '-n', env.namespace, '-o', 'wide']), {
    message: /unknown output format "wide": json or yaml/,
  });

  // --as: the admin acts as the namespace owner (who may read runs in their namespace only) and
  // as a stranger (who may read none): the apiserver decides, as for kubectl --as.
  const asOwner = await prestart(['list', '-n', env.namespace, '--as', `${env.instance}-tenant`]);
  t.is(asOwner.code, 0, asOwner.out);
  t.regex(asOwner.out, row);
  const ownerEverywhere = await prestart(['list', '-A', '--as', `${env.instance}-tenant`]);
  t.is(ownerEverywhere.code, 1);
  t.regex(ownerEverywhere.out, new RegExp(`${env.instance}-tenant.* cannot list resource "prestartruns"`));
  const stranger = await prestart(['why', 'habits-00001', '-n', env.namespace, '--as', 'nobody', '--as-group', 'system:authenticated']);
  t.is(stranger.code, 1);
  t.regex(stranger.out, /"nobody" cannot get resource "prestartruns"/);
  // The tenant cannot impersonate anyone.
  const noRight = await prestart(['list', '-n', env.namespace, '--as', 'admin'], tenantConfig);
  t.is(noRight.code, 1);
  // Kubernetes 1.36 (constrained impersonation) names the verb `impersonate:user-info`; 1.34, `impersonate`.
  t.regex(noRight.out, /cannot impersonate(:user-info)? resource "users"/);
  const groupAlone = await prestart(['list', '--as-group', 'system:masters']);
  t.is(groupAlone.code, 1);
  t.regex(groupAlone.out, /--as-group needs --as USER/);
});

test.serial('plan -f: the hooks a new Revision of the Service in the file would get, from the cluster’s PrestartHooks', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'plan-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'service.yaml');
  await writeFile(
    file,
    [
      'apiVersion: serving.knative.dev/v1',
      'kind: Service',
      `metadata: {name: checkout, namespace: ${env.namespace}}`,
      'spec:',
      '  template:',
      `    metadata: {annotations: {${KEY}: "yes"}}`,
      '    spec: {containers: [{image: dev.local/checkout}]}',
      '',
    ].join('\n'),
  );
  const plan = await prestart(['plan', '-f', file]);
  t.is(plan.code, 0, plan.out);
  t.regex(plan.out, new RegExp(`^A new Revision of checkout in ${env.namespace} would be held for 1 hook, in this order:$`, 'm'));
  t.regex(
    plan.out,
    new RegExp(
      `^ {2}${hookName} \\(order 0, failurePolicy Fail, timeout 10m\\): annotation ${KEY}=yes on the template; namespace labels match `,
      'm',
    ),
  );
  // The shared test cluster has the apiserver stamp installed wherever the apiserver serves it.
  t.regex(
    plan.out,
    (await servesMutatingPolicies(env.admin))
      ? /^Stamped by the apiserver \(MutatingAdmissionPolicy prestart-stamp-revisions; the gate registers no Revision webhook\): while no gate replica runs, it is admitted held/m
      : /^Stamped by the gate's webhook: while no gate replica runs, Knative's create of it is refused and retried/m,
  );
  const none = await prestart(['plan']);
  t.is(none.code, 1);
  t.regex(none.out, /give a Service name or -f FILE/);
});
