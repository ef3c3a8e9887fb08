// Self-approval (issue 10, M1): the owner of a namespace, whose Role there says verbs: ["*"] on
// everything, deploys a Revision held by the approval hook and approves it the way approvers do
// (`knative-prestart approve`). RBAC's `*` matches the custom verb approve in that namespace, so
// the approval policy asks in no namespace (config/610-approval-policy.yaml): the apiserver
// refuses, and the Revision stays held. An approver of another namespace is refused too; one
// bound cluster-wide approves.
import { randomBytes } from 'node:crypto';
import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { runCli } from '../../support/hook-cli.ts';
import { addHook, approvalPolicyInForce, builtinEnv, hookStatusOf, serveBuiltinHook } from '../hooks/builtin/_support.ts';

let env: GateEnv;
const kubeconfigs: Record<'owner' | 'elsewhere' | 'approver', string> = { owner: '', elsewhere: '', approver: '' };
const suffix = randomBytes(3).toString('hex');
const clusterNames = { elsewhere: `approve-elsewhere-${suffix}`, approver: `approver-${suffix}` };
const subject = (name: string) => [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name }];

test.before(async () => {
  env = await builtinEnv('selfapprove');
  const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({
    namespace: env.namespace,
    body: { metadata: { name: 'owner' }, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: 'owner' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'owner' },
      subjects: subject('mallory'),
    },
  });
  // carol approves another namespace's Revisions (and may patch Revisions here, as an editor could).
  await rbac.createClusterRole({
    body: {
      metadata: { name: clusterNames.elsewhere },
      rules: [{ apiGroups: ['prestart.dev'], resources: ['approvals'], resourceNames: [`not-${env.namespace}`], verbs: ['approve'] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: clusterNames.elsewhere },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterNames.elsewhere },
      subjects: subject('carol'),
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: 'carol' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-approver' },
      subjects: subject('carol'),
    },
  });
  // dave approves everywhere.
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: clusterNames.approver },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-approver' },
      subjects: subject('dave'),
    },
  });
  kubeconfigs.owner = await env.cluster.mintUserKubeconfig('mallory');
  kubeconfigs.elsewhere = await env.cluster.mintUserKubeconfig('carol');
  kubeconfigs.approver = await env.cluster.mintUserKubeconfig('dave');
  await approvalPolicyInForce(env);
});

test.after.always(async () => {
  if (env) {
    const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
    for (const name of Object.values(clusterNames)) {
      await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
      await rbac.deleteClusterRole({ name }).catch(() => undefined);
    }
  }
  await env?.stop();
});

test('a namespace owner with verbs ["*"] cannot approve their own Revision; a cluster-wide approver can', async (t) => {
  const server = await serveBuiltinHook(t, env, 'approval');
  const { hook, annotations } = await addHook(env, 'approval', server.url);
  const owner = new KubeConfig();
  owner.loadFromFile(kubeconfigs.owner);
  await env.createRevision('mine-00001', { annotations, kc: owner });
  await env.waitForRun('mine-00001', 'the hook waiting', (r) => /^waiting for approval/.test(hookStatusOf(r, hook)?.message ?? ''));

  const approve = (who: keyof typeof kubeconfigs) =>
    runCli(['approve', 'mine-00001', '-n', env.namespace, '--kubeconfig', kubeconfigs[who], '--reason', 'looks fine to me']);
  const self = await approve('owner');
  t.is(self.code, 1);
  t.regex(
    self.out,
    new RegExp(
      `^error: the apiserver refused the approval of ${env.namespace}/mine-00001 by mallory: .*ValidatingAdmissionPolicy 'prestart-approvals'.*` +
        `mallory may not approve or reject Revision mine-00001 in ${env.namespace}: that takes the verb approve on approvals\\.prestart\\.dev/${env.namespace}, ` +
        'which only a ClusterRoleBinding grants',
    ),
  );
  const other = await approve('elsewhere');
  t.is(other.code, 1, 'an approver of another namespace');
  t.regex(other.out, /carol may not approve or reject Revision mine-00001/);

  const held = await env.getRevision('mine-00001');
  t.true(isHeld(held), 'still held');
  t.is(held.metadata?.annotations?.['prestart.dev/approval'], undefined, 'no decision was written');
  t.is(hookStatusOf(await env.getRun('mine-00001'), hook)?.phase, 'Requested', 'the hook still waits');

  const ok = await approve('approver');
  t.is(ok.code, 0, ok.out);
  t.is(ok.out, `Revision ${env.namespace}/mine-00001 approved by dave\n`);
  await env.waitReleased('mine-00001');
  const run = await env.waitForRun('mine-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.regex(hookStatusOf(run, hook)?.message ?? '', /^approved by dave at \S+: looks fine to me$/);
});
