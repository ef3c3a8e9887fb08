// The approval hook on the real control plane: people with the verb approve for the Revision's
// namespace (RBAC: a ClusterRole naming the namespace) approve or reject with `knative-prestart
// approve|reject`; the apiserver's policy (config/610-approval-policy.yaml) refuses everyone
// else, and anyone writing a decision in another's name. The hook counts what its params ask
// for, records each decision as an Event, and `kn prestart why` says who decided what.

import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  ApiException,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { Command } from 'commander';
import { registerPrestartCommands } from '../../../../cli/prestart/commands.ts';
import { decisionId } from '../../../../hooks/builtin/approval/decision.ts';
import { runCli } from '../../../support/hook-cli.ts';
import { addHook, approvalPolicyInForce, builtinEnv, hookStatusOf, serveBuiltinHook } from './_support.ts';

let env: GateEnv;
const people = ['alice', 'bob', 'carol', 'dave'] as const;
type Person = (typeof people)[number];
const users = {} as Record<Person, string>;
// carol is a release manager through her group; the others are named.
const GROUPS: Partial<Record<Person, string[]>> = { carol: ['release-managers'] };

test.before(async () => {
  env = await builtinEnv('approval');
  const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  const namespace = env.namespace;
  // alice, carol and dave approve in this namespace only (docs/hooks.md: the decision verb through
  // a ClusterRole naming the namespace, the approver role in the namespace for patching its
  // Revisions); bob may edit its Revisions but was not made an approver.
  const approvers = (['alice', 'carol', 'dave'] as const).map((name) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name }));
  await rbac.createClusterRole({
    body: {
      metadata: { name: approveRole(namespace) },
      rules: [{ apiGroups: ['prestart.dev'], resources: ['approvals'], resourceNames: [namespace], verbs: ['approve'] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: approveRole(namespace) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: approveRole(namespace) },
      subjects: approvers,
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'approvers' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-approver' },
      subjects: approvers,
    },
  });
  await rbac.createNamespacedRole({
    namespace,
    body: {
      metadata: { name: 'revision-editor' },
      rules: [
        { apiGroups: ['serving.knative.dev'], resources: ['revisions'], verbs: ['get', 'list', 'patch', 'update'] },
        { apiGroups: ['prestart.dev'], resources: ['prestartruns'], verbs: ['get', 'list'] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'developers' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'revision-editor' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
    },
  });
  for (const p of people) users[p] = await env.cluster.mintUserKubeconfig(p, GROUPS[p] ?? []);
  await approvalPolicyInForce(env);
});

test.after.always(async () => {
  if (env) {
    const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac.deleteClusterRoleBinding({ name: approveRole(env.namespace) }).catch(() => undefined);
    await rbac.deleteClusterRole({ name: approveRole(env.namespace) }).catch(() => undefined);
  }
  await env?.stop();
});

const approveRole = (namespace: string) => `approve-${namespace}`;

function as(user: Person): CustomObjectsApi {
  const kc = new KubeConfig();
  kc.loadFromFile(users[user]);
  return kc.makeApiClient(CustomObjectsApi);
}

/** `kn prestart <args>` in this process, as the admin. */
async function prestart(args: string[]): Promise<string> {
  const lines: string[] = [];
  const program = new Command('knative-prestart').exitOverride();
  registerPrestartCommands(program, { out: (text) => lines.push(text), setExitCode: () => undefined, now: () => new Date() });
  await program.parseAsync(['node', 'knative-prestart', ...args, '--kubeconfig', env.cluster.kubeconfigPath]);
  return lines.join('\n');
}

/** A Revision (written by `author`, as Knative records it) held by its own approval hook, once the hook is waiting. */
async function heldForApproval(
  t: ExecutionContext,
  suffix: string,
  revision: string,
  params: Record<string, unknown> = {},
  author = 'bob',
): Promise<string> {
  const server = await serveBuiltinHook(t, env, 'approval');
  const { hook, annotations } = await addHook(env, suffix, server.url, { params });
  await env.createRevision(revision, { annotations: { ...annotations, 'serving.knative.dev/creator': author } });
  await env.waitForRun(revision, 'the hook waiting', (r) => /^waiting for approval/.test(hookStatusOf(r, hook)?.message ?? ''));
  return hook;
}

const decide = (verb: 'approve' | 'reject', revision: string, who: Person, message?: string) =>
  runCli([verb, revision, '-n', env.namespace, '--kubeconfig', users[who], ...(message ? ['--message', message] : [])]);

const AT = String.raw`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`;

test('one approver (the config of old: N=1) releases the Revision, and the hook records who, their groups, when and why', async (t) => {
  const hook = await heldForApproval(t, 'approve', 'pay-00001');
  const run0 = await env.waitForRun('pay-00001', 'waiting', () => true);
  t.is(hookStatusOf(run0, hook)?.message, 'waiting for approval: 0 of 1 approval; still needs 1 more');
  t.is(
    hookStatusOf(run0, hook)?.details,
    `knative-prestart approve pay-00001 -n ${env.namespace} --message "…" (or: knative-prestart reject pay-00001 -n ${env.namespace} --message "…")`,
  );

  const { out, code } = await decide('approve', 'pay-00001', 'alice', 'schema reviewed');
  t.is(code, 0);
  t.is(out, `Revision ${env.namespace}/pay-00001 approved by alice\n`);

  await env.waitReleased('pay-00001');
  const run = await env.waitForRun('pay-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.regex(
    hookStatusOf(run, hook)?.message ?? '',
    new RegExp(`^approved by alice \\(groups: system:authenticated\\) at ${AT}: schema reviewed$`),
  );
  const id = decisionId('alice');
  t.like((await env.getRevision('pay-00001')).metadata?.annotations, {
    [`prestart.dev/approval.${id}`]: 'approved',
    [`prestart.dev/approval-by.${id}`]: 'alice',
    [`prestart.dev/approval-groups.${id}`]: 'system:authenticated',
    [`prestart.dev/approval-message.${id}`]: 'schema reviewed',
  });
});

test('two of three with a required approver: released only once the required one approved; why and Events say who, when and why', async (t) => {
  const hook = await heldForApproval(t, 'quorum', 'orders-00001', {
    approvals: 2,
    approvers: ['dave'],
    approverGroups: ['release-managers'],
    requiredApprovers: ['alice'],
  });
  const waiting = async (what: RegExp) =>
    env.waitForRun('orders-00001', `the hook to say ${what}`, (r) => what.test(hookStatusOf(r, hook)?.message ?? ''));

  t.is((await decide('approve', 'orders-00001', 'dave', 'load test passed')).code, 0);
  await waiting(/1 of 2 approvals; still needs alice \(required\); approved by dave/);
  const why1 = await prestart(['why', 'orders-00001', '-n', env.namespace]);
  t.regex(
    why1,
    /is held while it waits for hook .*1 of 2 approvals; still needs alice \(required\); approved by dave \(groups: system:authenticated\) at \S+: load test passed/,
  );
  t.regex(why1, new RegExp(`Details for ${hook}: knative-prestart approve orders-00001`));

  t.is((await decide('approve', 'orders-00001', 'carol', 'release notes ok')).code, 0);
  // Decisions are listed by the second the apiserver recorded them, then by name: dave's and
  // carol's may share a second, so each is looked for on its own.
  await waiting(
    /2 of 2 approvals; still needs alice \(required\); (?=.*approved by dave \(groups: [^)]*\) at \S+: load test passed)(?=.*approved by carol \(groups: release-managers, system:authenticated\) at \S+: release notes ok)/,
  );
  t.true(isHeld(await env.getRevision('orders-00001')), 'two approvals without the required approver do not release it');

  t.is((await decide('approve', 'orders-00001', 'alice', 'go')).code, 0);
  await env.waitReleased('orders-00001');
  const run = await env.waitForRun('orders-00001', 'Released', (r) => r.status?.phase === 'Released');
  // Decisions are listed by the second the apiserver recorded them, then by name: carol's and
  // alice's may share a second, so each is checked on its own.
  const released = hookStatusOf(run, hook)?.message ?? '';
  t.regex(released, /^3 approvals \(2 needed\); approved by /);
  t.regex(released, new RegExp(`approved by dave \\(groups: [^)]*\\) at ${AT}: load test passed(;|$)`));
  t.regex(released, new RegExp(`approved by carol \\(groups: release-managers[^)]*\\) at ${AT}: release notes ok(;|$)`));
  t.regex(released, new RegExp(`approved by alice \\(groups: [^)]*\\) at ${AT}: go(;|$)`));
  const why = await prestart(['why', 'orders-00001', '-n', env.namespace]);
  t.regex(why, /is not held: it was released at \S+ \(.*approved by alice \(groups: system:authenticated\) at \S+: go/);

  const events = await waitFor(
    async () => {
      const all = (await env.revisionEvents('orders-00001')).filter((e) => e.reason === 'Approved');
      return all.length === 3 ? all : undefined;
    },
    { what: 'an Approved Event for each of the three' },
  );
  const texts = events.map((e) => e.message ?? '').sort();
  t.regex(
    texts.find((m) => m.startsWith('approved by alice')) ?? '',
    new RegExp(`^approved by alice \\(groups: system:authenticated\\) at ${AT}: go \\(hook ${hook}: 3 approvals \\(2 needed\\)\\)$`),
  );
  t.regex(texts.find((m) => m.startsWith('approved by dave')) ?? '', /\(hook .*: 1 of 2 approvals; still needs alice \(required\)\)$/);
});

test('the apiserver refuses a decision from someone who is not an approver, or in another’s name', async (t) => {
  const hook = await heldForApproval(t, 'refuse', 'ledger-00001');
  const patch = (user: Person, annotations: Record<string, string>) =>
    as(user)
      .patchNamespacedCustomObject(
        {
          group: 'serving.knative.dev',
          version: 'v1',
          plural: 'revisions',
          namespace: env.namespace,
          name: 'ledger-00001',
          body: { metadata: { annotations } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .then(
        () => ({ code: 200, body: '' }),
        (err: unknown) => (err instanceof ApiException ? { code: err.code, body: String(err.body) } : Promise.reject(err)),
      );

  const bob = await patch('bob', { 'prestart.dev/approval.b0b': 'approved', 'prestart.dev/approval-by.b0b': 'bob' });
  t.is(bob.code, 403, 'bob may edit Revisions, but not approve them');
  t.regex(bob.body, /bob may not approve or reject Revision ledger-00001 .*verb approve on approvals\.prestart\.dev\//);

  const viaCli = await decide('approve', 'ledger-00001', 'bob');
  t.is(viaCli.code, 1);
  t.regex(viaCli.out, /^error: the apiserver refused the approval of .*\/ledger-00001 by bob: .*bob may not approve/);

  const forged = await patch('alice', { 'prestart.dev/approval.a1': 'approved', 'prestart.dev/approval-by.a1': 'carol' });
  t.is(forged.code, 403, 'alice may approve, but only as herself');
  t.regex(forged.body, /approval-by\.a1 must be alice, the user writing the decision, not \\?"carol\\?"/);

  t.true(isHeld(await env.getRevision('ledger-00001')));
  const run = await env.waitForRun('ledger-00001', 'still waiting', () => true);
  t.is(hookStatusOf(run, hook)?.phase, 'Requested');
  t.false(
    Object.keys((await env.getRevision('ledger-00001')).metadata?.annotations ?? {}).some((k) => k.startsWith('prestart.dev/approval')),
    'no decision was written',
  );
});

test('a rejection fails the hook with the rejecter’s message, and the Revision stays held', async (t) => {
  const hook = await heldForApproval(t, 'reject', 'risky-00001', { approvals: 2 });
  t.is((await decide('approve', 'risky-00001', 'dave', 'fine by me')).code, 0);
  const { code, out } = await decide('reject', 'risky-00001', 'alice', 'not during the freeze');
  t.is(code, 0);
  t.is(out, `Revision ${env.namespace}/risky-00001 rejected by alice\n`);

  const run = await env.waitForRun('risky-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  t.is(hookStatusOf(run, hook)?.phase, 'Failed');
  t.regex(
    hookStatusOf(run, hook)?.message ?? '',
    new RegExp(
      `^rejected by alice \\(groups: system:authenticated\\) at ${AT}: not during the freeze; 1 of 2 approvals; still needs 1 more; approved by dave`,
    ),
  );
  t.true(isHeld(await env.getRevision('risky-00001')));
  t.regex(
    await prestart(['why', 'risky-00001', '-n', env.namespace]),
    /is held because hook .* failed: rejected by alice .*: not during the freeze/,
  );
  const rejected = await waitFor(async () => (await env.revisionEvents('risky-00001')).find((e) => e.reason === 'Rejected'), {
    what: 'the Rejected Event',
  });
  t.is(rejected.type, 'Warning');
  t.regex(rejected.message ?? '', /^rejected by alice .*: not during the freeze \(hook .*: rejected\)$/);
});
