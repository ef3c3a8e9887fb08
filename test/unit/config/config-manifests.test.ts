// The install manifests in config/: they parse, and their parts agree with each other and with
// the gate's code. (What the apiserver makes of them is checked against a real one.)
import { readdirSync, readFileSync } from 'node:fs';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import test from 'ava';

type Doc = ReturnType<typeof parseManifests>[number] & Record<string, unknown>;
const dir = new URL('../../../config/', import.meta.url);
const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
const docs: Doc[] = files.flatMap((f) => parseManifests(readFileSync(new URL(f, dir), 'utf8')) as Doc[]);
const find = (kind: string, name: string): Doc => {
  const doc = docs.find((d) => d.kind === kind && d.metadata?.name === name);
  if (!doc) throw new Error(`config/ has no ${kind} ${name}`);
  return doc;
};
// biome-ignore lint/suspicious/noExplicitAny: walking untyped YAML
const get = (doc: unknown, path: string): any => path.split('.').reduce((v: any, k) => v?.[k], doc);

test('every manifest parses and names itself as part of knative-prestart', (t) => {
  // The install's backbone is there (new manifests may join; each must parse and be labelled).
  for (const name of [
    '100-prestarthook-crd.yaml',
    '100-prestartrun-crd.yaml',
    '200-hold-policy.yaml',
    '220-revision-pods-policy.yaml',
    '300-rbac.yaml',
    '400-webhooks.yaml',
    '500-gate.yaml',
    '600-builtin-hooks.yaml',
    '610-approval-policy.yaml',
    '620-builtin-hook-deployments.yaml',
  ]) {
    t.true(files.includes(name), `config/${name} is missing`);
  }
  for (const d of docs) {
    t.truthy(d.metadata?.name, `${d.kind} without a name`);
    t.is(d.metadata?.labels?.['app.kubernetes.io/part-of'], 'knative-prestart', `${d.kind} ${d.metadata?.name}`);
  }
});

test('the CRDs have the names, scopes and kubectl columns users type and read', (t) => {
  const hook = find('CustomResourceDefinition', 'prestarthooks.prestart.dev');
  const run = find('CustomResourceDefinition', 'prestartruns.prestart.dev');
  t.is(get(hook, 'spec.scope'), 'Cluster');
  t.is(get(run, 'spec.scope'), 'Namespaced');
  t.deepEqual(get(hook, 'spec.names.shortNames'), ['psh']);
  t.deepEqual(get(run, 'spec.names.shortNames'), ['psr']);
  const columns = (crd: Doc) => get(crd, 'spec.versions.0.additionalPrinterColumns').map((c: { name: string }) => c.name);
  t.deepEqual(columns(hook), ['Order', 'Transport', 'Timeout', 'Policy', 'Age']);
  t.deepEqual(columns(run), ['Phase', 'Hooks', 'Reason', 'Message', 'Age']);
  t.deepEqual(get(run, 'spec.versions.0.subresources'), { status: {} });
});

test('a PrestartHook left at its defaults waits 10m, resends every 30s, fails closed and uses http', (t) => {
  const spec = get(
    find('CustomResourceDefinition', 'prestarthooks.prestart.dev'),
    'spec.versions.0.schema.openAPIV3Schema.properties.spec',
  );
  t.is(spec.properties.order.default, 0);
  t.is(spec.properties.timeout.default, '10m');
  t.is(spec.properties.resendInterval.default, '30s');
  t.is(spec.properties.failurePolicy.default, 'Fail');
  t.is(spec.properties.delivery.properties.transport.default, 'http');
  t.true(spec.properties.params['x-kubernetes-preserve-unknown-fields']);
});

test('each policy fails closed and is bound to deny', (t) => {
  for (const name of [
    'prestart-hold-deployments',
    'prestart-protect-revisions',
    'prestart-protect-runs',
    'prestart-stamp-revisions',
    'prestart-knative-status',
    'prestart-revision-pods',
    'prestart-revision-replicasets',
    'prestart-revision-metadata',
  ]) {
    t.is(get(find('ValidatingAdmissionPolicy', name), 'spec.failurePolicy'), 'Fail', name);
    const binding = find('ValidatingAdmissionPolicyBinding', name);
    t.is(get(binding, 'spec.policyName'), name);
    t.deepEqual(get(binding, 'spec.validationActions'), ['Deny']);
  }
});

test("the gate's identity holds the verb the policies ask the authorizer for", (t) => {
  const rules = get(find('ClusterRole', 'knative-prestart-gate'), 'rules') as { resources: string[]; verbs: string[] }[];
  t.true(rules.some((r) => r.resources.includes('prestartruns') && r.verbs.includes('release')));
  const policies = readFileSync(new URL('200-hold-policy.yaml', dir), 'utf8');
  t.is(policies.match(/resource\('prestartruns'\)\.check\('release'\)/g)?.length, 4);
  const binding = find('ClusterRoleBinding', 'knative-prestart-gate');
  t.deepEqual(get(binding, 'subjects'), [{ kind: 'ServiceAccount', name: 'knative-prestart-gate', namespace: 'knative-prestart' }]);
  t.is(get(find('Deployment', 'knative-prestart-gate'), 'spec.template.spec.serviceAccountName'), 'knative-prestart-gate');
});

test('the stamp policy checks the Revisions the webhook sees: CREATE, outside the same namespaces', (t) => {
  const policy = find('ValidatingAdmissionPolicy', 'prestart-stamp-revisions');
  const webhook = get(find('MutatingWebhookConfiguration', 'knative-prestart'), 'webhooks.0');
  t.is(webhook.name, 'revisions.prestart.dev');
  t.is(webhook.failurePolicy, 'Ignore');
  t.deepEqual(get(policy, 'spec.matchConstraints.namespaceSelector'), webhook.namespaceSelector);
  t.deepEqual(get(policy, 'spec.matchConstraints.resourceRules.0.operations'), webhook.rules[0].operations);
  t.deepEqual(get(policy, 'spec.paramKind'), { apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook' });
  t.deepEqual(get(find('ValidatingAdmissionPolicyBinding', 'prestart-stamp-revisions'), 'spec.paramRef'), {
    selector: {},
    parameterNotFoundAction: 'Allow',
  });
});

test('the webhooks reach the Service port that leads to the webhook container port', (t) => {
  const service = find('Service', 'knative-prestart-gate');
  const container = get(find('Deployment', 'knative-prestart-gate'), 'spec.template.spec.containers.0');
  const ports = get(service, 'spec.ports') as { name: string; port: number; targetPort: string }[];
  for (const hook of get(find('MutatingWebhookConfiguration', 'knative-prestart'), 'webhooks')) {
    const ref = hook.clientConfig.service;
    t.is(`${ref.namespace}/${ref.name}`, `${service.metadata?.namespace}/${service.metadata?.name}`);
    const target = ports.find((p) => p.port === ref.port)?.targetPort;
    t.is(container.ports.find((p: { name: string }) => p.name === target)?.containerPort, 8443);
  }
  t.true(container.args.includes('--webhook-port=8443'));
  t.is(container.ports.find((p: { name: string }) => p.name === ports.find((s) => s.port === 80)?.targetPort)?.containerPort, 8080);
});
