// Self-approval and its family, each attacked the way an approver would try it, through
// `knative-prestart approve` and by writing the annotations directly:
// - the owner of a namespace, whose Role there says verbs: ["*"] on everything, approves a Revision
//   held by the approval hook. RBAC's `*` matches the custom verb approve in that namespace, so the
//   approval policy asks in no namespace (config/610-approval-policy.yaml): the apiserver refuses,
//   and the Revision stays held. An approver of another namespace is refused too; one bound
//   cluster-wide approves;
// - the Revision's author (serving.knative.dev/creator, as Knative records it) approves it, or
//   first rewrites who the author is;
// - an approver approves twice (again, under another id), changes or withdraws their decision;
// - an approver writes a decision in another's name, or as a member of a group they are not in.
// Each is refused with a sentence saying why, and changes nothing: the decisions on the Revision
// and the hook's count stay as they were.
import { randomBytes } from 'node:crypto';
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
import test from 'ava';
import { runCli } from '../../support/hook-cli.ts';
import { addHook, approvalPolicyInForce, builtinEnv, hookStatusOf, serveBuiltinHook } from '../hooks/builtin/_support.ts';

let env: GateEnv;
const kubeconfigs: Record<'owner' | 'elsewhere' | 'approver' | 'erin' | 'frank', string> = {
  owner: '',
  elsewhere: '',
  approver: '',
  erin: '',
  frank: '',
};
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
  // dave, erin and frank approve everywhere.
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: clusterNames.approver },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knative-prestart-approver' },
      subjects: [...subject('dave'), ...subject('erin'), ...subject('frank')],
    },
  });
  kubeconfigs.owner = await env.cluster.mintUserKubeconfig('mallory');
  kubeconfigs.elsewhere = await env.cluster.mintUserKubeconfig('carol');
  kubeconfigs.approver = await env.cluster.mintUserKubeconfig('dave');
  kubeconfigs.erin = await env.cluster.mintUserKubeconfig('erin', ['sre']);
  kubeconfigs.frank = await env.cluster.mintUserKubeconfig('frank');
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
  t.false(
    Object.keys(held.metadata?.annotations ?? {}).some((k) => k.startsWith('prestart.dev/approval')),
    'no decision was written',
  );
  t.is(hookStatusOf(await env.getRun('mine-00001'), hook)?.phase, 'Requested', 'the hook still waits');

  const ok = await approve('approver');
  t.is(ok.code, 0, ok.out);
  t.is(ok.out, `Revision ${env.namespace}/mine-00001 approved by dave\n`);
  await env.waitReleased('mine-00001');
  const run = await env.waitForRun('mine-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.regex(hookStatusOf(run, hook)?.message ?? '', /^approved by dave \(groups: system:authenticated\) at \S+: looks fine to me$/);
});

type Who = keyof typeof kubeconfigs;

function asUser(who: Who): CustomObjectsApi {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigs[who]);
  return kc.makeApiClient(CustomObjectsApi);
}

/** A merge patch of the Revision's annotations as `who`, the way kubectl annotate writes: the status code and the apiserver's sentence. */
async function annotate(who: Who, revision: string, annotations: Record<string, string | null>): Promise<{ code: number; body: string }> {
  return asUser(who)
    .patchNamespacedCustomObject(
      {
        group: 'serving.knative.dev',
        version: 'v1',
        plural: 'revisions',
        namespace: env.namespace,
        name: revision,
        body: { metadata: { annotations } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )
    .then(
      () => ({ code: 200, body: '' }),
      (err: unknown) => (err instanceof ApiException ? { code: err.code, body: String(err.body) } : Promise.reject(err)),
    );
}

const decisionsOn = async (revision: string) =>
  Object.fromEntries(
    Object.entries((await env.getRevision(revision)).metadata?.annotations ?? {}).filter(([k]) => k.startsWith('prestart.dev/approval')),
  );

test('the author, a second decision, a changed or withdrawn one, another’s name or group: each refused, nothing changes', async (t) => {
  const server = await serveBuiltinHook(t, env, 'approval');
  const { hook, annotations } = await addHook(env, 'quorum', server.url, { params: { approvals: 2 } });
  // Knative writes the user who changed the Service as the Revision's creator.
  await env.createRevision('twice-00001', { annotations: { ...annotations, 'serving.knative.dev/creator': 'dave' } });
  await env.waitForRun('twice-00001', 'the hook waiting', (r) => /^waiting for approval/.test(hookStatusOf(r, hook)?.message ?? ''));
  const cli = (verb: 'approve' | 'reject', who: Who, ...more: string[]) =>
    runCli([verb, 'twice-00001', '-n', env.namespace, '--kubeconfig', kubeconfigs[who], ...more]);
  const refusals: { what: string; code: number; text: string; expect: RegExp }[] = [];
  const expectRefused = (what: string, r: { code: number; out?: string; body?: string }, expect: RegExp) =>
    refusals.push({ what, code: r.code, text: r.out ?? r.body ?? '', expect });

  // The author.
  const authorSays = new RegExp(
    `dave wrote Revision twice-00001 in ${env.namespace} \\(serving\\.knative\\.dev/creator\\) and may not approve it`,
  );
  expectRefused('the author, through the CLI', await cli('approve', 'approver', '--message', 'mine, and fine'), authorSays);
  expectRefused(
    'the author, by hand',
    await annotate('approver', 'twice-00001', {
      'prestart.dev/approval.d1': 'approved',
      'prestart.dev/approval-by.d1': 'dave',
      'prestart.dev/approval-groups.d1': 'system:authenticated',
    }),
    authorSays,
  );
  expectRefused(
    'the author, naming someone else the author first',
    await annotate('approver', 'twice-00001', { 'serving.knative.dev/creator': 'nobody' }),
    /dave may not change the labels or annotations of Revision twice-00001/,
  );

  // erin approves once, as she may.
  const first = await cli('approve', 'erin', '--message', 'checked the diff');
  t.is(first.code, 0, first.out);
  await env.waitForRun('twice-00001', '1 of 2', (r) =>
    /^waiting for approval: 1 of 2 approvals; still needs 1 more; approved by erin/.test(hookStatusOf(r, hook)?.message ?? ''),
  );
  const before = await decisionsOn('twice-00001');
  const erin =
    Object.entries(before)
      .find(([k, v]) => k.startsWith('prestart.dev/approval-by.') && v === 'erin')?.[0]
      .split('.')
      .pop() ?? '';
  t.not(erin, '');

  // Twice, changed, withdrawn.
  expectRefused(
    'a second approval, through the CLI',
    await cli('approve', 'erin'),
    /^error: erin already decided on Revision .*twice-00001: approved by erin .*A decision is final; nothing was changed$/m,
  );
  expectRefused(
    'a rejection after her approval, through the CLI',
    await cli('reject', 'erin', '--message', 'changed my mind'),
    /erin already decided/,
  );
  const already = new RegExp(`erin already decided on Revision twice-00001 in ${env.namespace}: each person decides once`);
  expectRefused(
    'a second approval under another id',
    await annotate('erin', 'twice-00001', {
      'prestart.dev/approval.e2': 'approved',
      'prestart.dev/approval-by.e2': 'erin',
      'prestart.dev/approval-groups.e2': 'sre\nsystem:authenticated',
    }),
    already,
  );
  const final = /decisions on Revision twice-00001 in .* are final: erin may not change or remove prestart\.dev\/approval/;
  expectRefused(
    'her approval turned into a rejection',
    await annotate('erin', 'twice-00001', { [`prestart.dev/approval.${erin}`]: 'rejected' }),
    final,
  );
  expectRefused(
    'her message rewritten',
    await annotate('erin', 'twice-00001', { [`prestart.dev/approval-message.${erin}`]: 'something else' }),
    final,
  );
  expectRefused(
    'her decision withdrawn',
    await annotate('erin', 'twice-00001', { [`prestart.dev/approval.${erin}`]: null, [`prestart.dev/approval-by.${erin}`]: null }),
    final,
  );
  expectRefused(
    'someone else’s decision withdrawn',
    await annotate('frank', 'twice-00001', { [`prestart.dev/approval.${erin}`]: null }),
    /frank may not change or remove/,
  );

  // In another's name, or another's group.
  expectRefused(
    'frank approving in erin’s name',
    await annotate('frank', 'twice-00001', { 'prestart.dev/approval.f1': 'approved', 'prestart.dev/approval-by.f1': 'erin' }),
    /approval-by\.f1 must be frank, the user writing the decision, not \\?"erin\\?"/,
  );
  expectRefused(
    'frank claiming a group he is not in',
    await annotate('frank', 'twice-00001', {
      'prestart.dev/approval.f1': 'approved',
      'prestart.dev/approval-by.f1': 'frank',
      'prestart.dev/approval-groups.f1': 'sre\nsystem:authenticated',
    }),
    /approval-groups\.f1 must be the groups the apiserver authenticated frank with, one a line \(system:authenticated\)/,
  );
  expectRefused(
    'frank writing half of someone else’s keys',
    await annotate('frank', 'twice-00001', { 'prestart.dev/approval.f1': 'approved', 'prestart.dev/approval-by.f2': 'frank' }),
    /do not make one decision/,
  );

  for (const r of refusals) {
    t.not(r.code, 0, `${r.what}: refused`);
    t.regex(r.text, r.expect, r.what);
  }
  t.deepEqual(await decisionsOn('twice-00001'), before, 'no refusal changed a decision');
  t.true(isHeld(await env.getRevision('twice-00001')), 'still held');
  t.regex(
    hookStatusOf(await env.getRun('twice-00001'), hook)?.message ?? '',
    /^waiting for approval: 1 of 2 approvals; still needs 1 more; approved by erin \(groups: sre, system:authenticated\)/,
  );

  // Control: a second person's approval, as the rules allow, releases it.
  t.is((await cli('approve', 'frank', '--message', 'ok')).code, 0);
  await env.waitReleased('twice-00001');
  const run = await env.waitForRun('twice-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.regex(hookStatusOf(run, hook)?.message ?? '', /^2 of 2 approvals; approved by erin .*: checked the diff; approved by frank .*: ok$/);
});
