import { readFileSync } from 'node:fs';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import type { V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import test from 'ava';
import {
  buildWebhookConfiguration,
  sameWebhookConfiguration,
  webhookNamespaceSelector,
} from '../../../../gate/webhooks/webhook-configuration.ts';

const service = { name: 'knative-prestart-gate', namespace: 'knative-prestart', port: 443 };
const systemNamespaces = ['kube-system', 'knative-serving', 'knative-eventing', 'knative-prestart'];

test('config/400-webhooks.yaml is what the gate registers in a cluster', (t) => {
  // Read as plain YAML: a typed loader would silently drop a misspelt field.
  const [fromYaml] = parseManifests(readFileSync(new URL('../../../../config/400-webhooks.yaml', import.meta.url), 'utf8'));
  const built = buildWebhookConfiguration({ name: 'knative-prestart', service });
  t.true(sameWebhookConfiguration(built, fromYaml as V1MutatingWebhookConfiguration));
  t.true(sameWebhookConfiguration(fromYaml as V1MutatingWebhookConfiguration, built));
});

test('the local form calls the gate by URL and trusts the given CA', (t) => {
  const pem = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
  const config = buildWebhookConfiguration({
    name: 'knative-prestart-a',
    urlBase: 'https://127.0.0.1:18443/',
    caBundle: pem,
    instance: 'a',
  });
  const [revisions, pods] = config.webhooks ?? [];
  t.deepEqual(revisions?.clientConfig, {
    url: 'https://127.0.0.1:18443/webhooks/revisions',
    caBundle: Buffer.from(pem).toString('base64'),
  });
  t.is(pods?.clientConfig.url, 'https://127.0.0.1:18443/webhooks/pods');
  t.is(config.metadata?.labels?.['prestart.dev/gate'], 'a');
});

test('where the apiserver stamps, no Revision webhook is registered; the bindings webhooks stay', (t) => {
  const names = (stampRevisions?: boolean) =>
    buildWebhookConfiguration({
      name: 'knative-prestart',
      service,
      ...(stampRevisions === undefined ? {} : { stampRevisions }),
    }).webhooks?.map((w) => w.name);
  t.deepEqual(names(false), ['pods.prestart.dev', 'deployments.prestart.dev']);
  t.deepEqual(names(true), ['revisions.prestart.dev', 'pods.prestart.dev', 'deployments.prestart.dev']);
  t.deepEqual(names(), names(true), 'the webhook stamps unless told otherwise');
});

test('the Revision webhook fails open behind the stamp policy; bindings fail closed, only where a pod spec is written', (t) => {
  const config = buildWebhookConfiguration({ name: 'knative-prestart', service });
  const [revisions, pods, deployments] = config.webhooks ?? [];
  t.is(revisions?.name, 'revisions.prestart.dev');
  t.deepEqual(revisions?.rules, [
    { apiGroups: ['serving.knative.dev'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['revisions'], scope: 'Namespaced' },
  ]);
  t.is(revisions?.failurePolicy, 'Ignore', 'config/210-stamp-policy.yaml refuses what a hook matches');
  t.is(pods?.name, 'pods.prestart.dev');
  t.deepEqual(pods?.objectSelector, { matchLabels: { 'prestart.dev/inject': 'true' } });
  t.deepEqual(
    pods?.matchConditions?.map((c) => c.expression),
    ["!('prestart.dev/injected' in object.metadata.?annotations.orValue({}))"],
  );
  t.is(deployments?.name, 'deployments.prestart.dev');
  t.deepEqual(deployments?.rules?.[0]?.operations, ['CREATE', 'UPDATE']);
  t.deepEqual(deployments?.objectSelector, { matchLabels: { 'prestart.dev/inject': 'true' } });
  t.deepEqual(
    deployments?.matchConditions?.map((c) => c.expression),
    ["request.operation == 'CREATE' || object.spec.template.spec != oldObject.spec.template.spec"],
  );
  for (const hook of [pods, deployments]) t.is(hook?.failurePolicy, 'Fail');
  for (const hook of [revisions, pods, deployments]) {
    t.is(hook?.sideEffects, 'None');
    t.is(hook?.timeoutSeconds, 5);
    t.is(hook?.reinvocationPolicy, 'Never');
  }
});

test('an endpoint must be given exactly once, over https', (t) => {
  t.throws(() => buildWebhookConfiguration({ name: 'x' }), { message: /exactly one of urlBase and service/ });
  t.throws(() => buildWebhookConfiguration({ name: 'x', service, urlBase: 'https://127.0.0.1:1' }), { message: /exactly one/ });
  t.throws(() => buildWebhookConfiguration({ name: 'x', urlBase: 'http://127.0.0.1:1' }), { message: /must be https/ });
});

test("a gate's namespace selector narrows the system-namespace exclusion, which always stays", (t) => {
  t.deepEqual(webhookNamespaceSelector({}), {
    matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: systemNamespaces }],
  });
  t.deepEqual(
    webhookNamespaceSelector({
      namespaceSelector: { matchLabels: { 'prestart.dev/gate': 'a' }, matchExpressions: [{ key: 'tier', operator: 'Exists' }] },
      gateNamespace: 'gate-a',
    }),
    {
      matchLabels: { 'prestart.dev/gate': 'a' },
      matchExpressions: [
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [...systemNamespaces, 'gate-a'] },
        { key: 'tier', operator: 'Exists' },
      ],
    },
  );
});

test('a configuration read back with the apiserver defaults and extra labels needs no update', (t) => {
  const desired = buildWebhookConfiguration({ name: 'knative-prestart', urlBase: 'https://127.0.0.1:8443', caBundle: 'PEM' });
  const asStored = structuredClone(desired);
  asStored.metadata = { ...asStored.metadata, resourceVersion: '42', uid: 'u', labels: { ...asStored.metadata?.labels, extra: 'x' } };
  for (const hook of asStored.webhooks ?? []) {
    if (hook.name === 'revisions.prestart.dev') {
      hook.matchConditions = [];
      delete hook.objectSelector;
    }
  }
  t.true(sameWebhookConfiguration(desired, asStored));
});

test('a different caBundle, URL or selector needs an update', (t) => {
  const base = { name: 'knative-prestart', urlBase: 'https://127.0.0.1:8443', caBundle: 'PEM' };
  const desired = buildWebhookConfiguration(base);
  t.false(sameWebhookConfiguration(desired, buildWebhookConfiguration({ ...base, caBundle: 'OTHER' })));
  t.false(sameWebhookConfiguration(desired, buildWebhookConfiguration({ ...base, urlBase: 'https://127.0.0.1:9443' })));
  t.false(sameWebhookConfiguration(desired, buildWebhookConfiguration({ ...base, namespaceSelector: { matchLabels: { a: 'b' } } })));
  const unlabelled = structuredClone(desired);
  unlabelled.metadata = { name: 'knative-prestart' };
  t.false(sameWebhookConfiguration(desired, unlabelled));
});
