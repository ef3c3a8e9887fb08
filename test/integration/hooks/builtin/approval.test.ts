// The approval hook on the real control plane: a person with the verb approve for the Revision's
// namespace (RBAC: a ClusterRole naming the namespace) approves or rejects with `knative-prestart
// approve`; the apiserver's policy (config/610-approval-policy.yaml) refuses everyone else, and
// anyone writing a decision in another's name.

import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import {
  ApiException,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { runCli } from '../../../support/hook-cli.ts';
import { addHook, approvalPolicyInForce, builtinEnv, hookStatusOf, serveBuiltinHook } from './_support.ts';

let env: GateEnv;
const users: Record<'alice' | 'bob', string> = { alice: '', bob: '' };

test.before(async () => {
  env = await builtinEnv('approval');
  const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  const namespace = env.namespace;
  // alice approves in this namespace only (docs/hooks.md: the decision verb through a
  // ClusterRole naming the namespace, the approver role in the namespace for patching its
  // Revisions); bob may edit its Revisions but was not made an approver.
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
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'approvers' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-approver' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
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
  users.alice = await env.cluster.mintUserKubeconfig('alice');
  users.bob = await env.cluster.mintUserKubeconfig('bob');
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

function as(user: keyof typeof users): CustomObjectsApi {
  const kc = new KubeConfig();
  kc.loadFromFile(users[user]);
  return kc.makeApiClient(CustomObjectsApi);
}

/** A Revision held by its own approval hook, once the hook is waiting. */
async function heldForApproval(t: ExecutionContext, suffix: string, revision: string): Promise<string> {
  const server = await serveBuiltinHook(t, env, 'approval');
  const { hook, annotations } = await addHook(env, suffix, server.url);
  await env.createRevision(revision, { annotations });
  await env.waitForRun(revision, 'the hook waiting', (r) => /^waiting for approval/.test(hookStatusOf(r, hook)?.message ?? ''));
  return hook;
}

test('an approver releases the Revision, and the hook records who and when', async (t) => {
  const hook = await heldForApproval(t, 'approve', 'pay-00001');
  const run0 = await env.waitForRun('pay-00001', 'waiting', () => true);
  t.is(
    hookStatusOf(run0, hook)?.message,
    `waiting for approval: knative-prestart approve pay-00001 -n ${env.namespace} (or --reject --reason "…")`,
  );

  const { out, code } = await runCli([
    'approve',
    'pay-00001',
    '-n',
    env.namespace,
    '--kubeconfig',
    users.alice,
    '--reason',
    'schema reviewed',
  ]);
  t.is(code, 0);
  t.is(out, `Revision ${env.namespace}/pay-00001 approved by alice\n`);

  await env.waitReleased('pay-00001');
  const run = await env.waitForRun('pay-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.regex(hookStatusOf(run, hook)?.message ?? '', /^approved by alice at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z: schema reviewed$/);
  t.like((await env.getRevision('pay-00001')).metadata?.annotations, {
    'prestart.dev/approval': 'approved',
    'prestart.dev/approval-by': 'alice',
    'prestart.dev/approval-reason': 'schema reviewed',
  });
});

test('the apiserver refuses a decision from someone who is not an approver, or in another’s name', async (t) => {
  const hook = await heldForApproval(t, 'refuse', 'ledger-00001');
  const patch = (user: keyof typeof users, annotations: Record<string, string>) =>
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

  const bob = await patch('bob', { 'prestart.dev/approval': 'approved', 'prestart.dev/approval-by': 'bob' });
  t.is(bob.code, 403, 'bob may edit Revisions, but not approve them');
  t.regex(bob.body, /bob may not approve or reject Revision ledger-00001 .*verb approve on approvals\.prestart\.dev\//);

  const viaCli = await runCli(['approve', 'ledger-00001', '-n', env.namespace, '--kubeconfig', users.bob]);
  t.is(viaCli.code, 1);
  t.regex(viaCli.out, /^error: the apiserver refused the approval of .*\/ledger-00001 by bob: .*bob may not approve/);

  const forged = await patch('alice', { 'prestart.dev/approval': 'approved', 'prestart.dev/approval-by': 'carol' });
  t.is(forged.code, 403, 'alice may approve, but only as herself');
  t.regex(forged.body, /approval-by must be alice, the user writing the decision, not \\?"carol\\?"/);

  t.true(isHeld(await env.getRevision('ledger-00001')));
  const run = await env.waitForRun('ledger-00001', 'still waiting', () => true);
  t.is(hookStatusOf(run, hook)?.phase, 'Requested');
  t.is((await env.getRevision('ledger-00001')).metadata?.annotations?.['prestart.dev/approval'], undefined);
});

test('a rejection keeps the Revision held, saying who rejected it and why', async (t) => {
  const hook = await heldForApproval(t, 'reject', 'risky-00001');
  const { code } = await runCli([
    'approve',
    'risky-00001',
    '-n',
    env.namespace,
    '--kubeconfig',
    users.alice,
    '--reject',
    '--reason',
    'not during the freeze',
  ]);
  t.is(code, 0);

  const run = await env.waitForRun('risky-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  t.is(hookStatusOf(run, hook)?.phase, 'Failed');
  t.regex(hookStatusOf(run, hook)?.message ?? '', /^rejected by alice at \S+: not during the freeze$/);
  t.true(isHeld(await env.getRevision('risky-00001')));
});
