// Least privilege in the install manifests (config/): what is bound cluster-wide reads no Secrets
// and runs nothing; the verbs the policies ask the authorizer for are asked in no namespace (so a
// namespace Role with verbs ["*"] cannot hold them) and granted to the one identity meant to hold
// each. What the apiserver makes of it: test/integration/security/can-i.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import test from 'ava';

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
type Doc = ReturnType<typeof parseManifests>[number] & {
  rules?: Rule[];
  roleRef?: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
  spec?: { failurePolicy?: string; policyName?: string; validationActions?: string[] };
};
const dir = new URL('../../../config/', import.meta.url);
const texts = readdirSync(dir)
  // The numbered files are the install manifests (others, e.g. monitoring rules, are not Kubernetes objects).
  .filter((f) => /^\d{3}-.*\.yaml$/.test(f))
  .map((f) => readFileSync(new URL(f, dir), 'utf8'));
const docs = texts.flatMap((text) => parseManifests(text) as Doc[]);
const find = (kind: string, name: string): Doc => {
  const doc = docs.find((d) => d.kind === kind && d.metadata?.name === name);
  if (!doc) throw new Error(`config/ has no ${kind} ${name}`);
  return doc;
};
const clusterWide = docs.filter((d) => d.kind === 'ClusterRoleBinding');
const grants = (rule: Rule, resource: string, verb: string) =>
  (rule.resources ?? []).includes(resource) && (rule.verbs.includes(verb) || rule.verbs.includes('*'));

test('the policies the hold rests on fail closed and are bound to deny', (t) => {
  for (const name of [
    'prestart-approvals',
    'prestart-protect-run-owners',
    'prestart-revision-deployments',
    'prestart-revision-pods',
    'prestart-revision-replicasets',
  ]) {
    t.is(find('ValidatingAdmissionPolicy', name).spec?.failurePolicy, 'Fail', name);
    t.deepEqual(find('ValidatingAdmissionPolicyBinding', name).spec?.validationActions, ['Deny'], name);
  }
});

test('nothing bound cluster-wide reads Secrets, creates Jobs or pods', (t) => {
  for (const binding of clusterWide) {
    if (binding.roleRef?.kind !== 'ClusterRole') continue;
    const role = find('ClusterRole', binding.roleRef.name);
    for (const rule of role.rules ?? []) {
      t.false(grants(rule, 'secrets', 'get'), `${role.metadata?.name} reads Secrets`);
      t.false(grants(rule, 'jobs', 'create'), `${role.metadata?.name} creates Jobs`);
      t.false(grants(rule, 'pods', 'create'), `${role.metadata?.name} creates pods`);
    }
  }
});

test('the job and secret hooks’ namespace roles are left for an admin to bind per namespace', (t) => {
  for (const role of ['knative-prestart-hook-job-namespace', 'knative-prestart-hook-secret-namespace']) {
    t.truthy(find('ClusterRole', role));
    t.false(
      docs.some((d) => (d.kind === 'ClusterRoleBinding' || d.kind === 'RoleBinding') && d.roleRef?.name === role),
      `config/ binds ${role}`,
    );
  }
});

test('the custom verbs are asked in no namespace, and granted to the identity meant to hold each', (t) => {
  const all = texts.join('\n');
  // Every authorizer check of the policies: none names a namespace.
  const checks = [...all.matchAll(/authorizer\.group\('prestart\.dev'\)[^\n]*?\.check\('(\w+)'\)/g)].map((m) => m[0]);
  t.true(checks.length >= 5, checks.join('\n'));
  for (const check of checks) t.false(check.includes('.namespace('), check);
  t.true(checks.some((c) => c.includes(".resource('approvals').name(request.namespace).check('approve')")));
  t.true(checks.some((c) => c.includes(".resource('revisiondeployments').check('write')")));

  const holders = (resource: string, verb: string) =>
    clusterWide
      .filter((b) => (find('ClusterRole', b.roleRef?.name ?? '').rules ?? []).some((r) => grants(r, resource, verb)))
      .flatMap((b) => (b.subjects ?? []).map((s) => `${s.kind} ${s.namespace ?? ''}/${s.name}`));
  t.deepEqual(holders('prestartruns', 'release'), ['ServiceAccount knative-prestart/knative-prestart-gate']);
  t.deepEqual(holders('revisiondeployments', 'write'), ['ServiceAccount knative-serving/controller']);
  t.deepEqual(holders('approvals', 'approve'), [], 'approvers are bound by the admin');
  // A Revision's pods and ReplicaSets (config/220-revision-pods-policy.yaml): made by the cluster's
  // own controllers, and a running pod changed by nobody but cluster admins.
  t.true(checks.some((c) => c.includes(".resource('revisionpods').check('create')")));
  t.true(checks.some((c) => c.includes(".resource('revisionpods').check('update')")));
  t.true(checks.some((c) => c.includes(".resource('revisionreplicasets').check('create')")));
  t.true(checks.some((c) => c.includes(".resource('revisionreplicasets').check('update')")));
  t.deepEqual(holders('revisionpods', 'create'), ['ServiceAccount kube-system/replicaset-controller']);
  t.deepEqual(holders('revisionpods', 'update'), [], 'nobody changes what a Revision’s pod runs');
  t.deepEqual(holders('revisionreplicasets', 'create'), ['ServiceAccount kube-system/deployment-controller']);
  t.deepEqual(holders('revisionreplicasets', 'update'), ['ServiceAccount kube-system/deployment-controller']);
  t.true((find('ClusterRole', 'knative-prestart-approver').rules ?? []).some((r) => grants(r, 'approvals', 'approve')));
});
