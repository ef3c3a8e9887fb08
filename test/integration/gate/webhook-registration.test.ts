// The gate keeps its own MutatingWebhookConfiguration current under its service account's RBAC
// (config/300-rbac.yaml): it may read and update the one the release ships, by name, and create
// none (a right to create a mutating webhook is a right over every object the apiserver admits).
// It leaves an equal one alone, rewrites a stale one, and where RBAC does not let it (a missing
// configuration, an instance nobody granted) says what the admin must do and changes nothing.

import { GATE_GROUPS, GATE_USER, installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { AdmissionregistrationV1Api, KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import { ensureWebhookConfiguration } from '../../../gate/webhooks/registration.ts';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
let gate: KubeConfig;
let admin: AdmissionregistrationV1Api;
const names: string[] = [];

test.before(async () => {
  const cluster = await installedCluster();
  gate = new KubeConfig();
  gate.loadFromFile(await cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS));
  admin = cluster.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
});

test.after.always(async () => {
  for (const name of names) await admin.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
});

/** The tests share the cluster: these configurations must intercept nothing (they point nowhere and fail closed). */
const NOWHERE = { namespaceSelector: { matchLabels: { 'prestart.dev/gate': `no-such-gate-${process.pid}` } } };

const urlOf = async (name: string) => (await admin.readMutatingWebhookConfiguration({ name })).webhooks?.[0]?.clientConfig.url;

/** As an admin applies config/400-webhooks.yaml: the configuration the gate then keeps current. */
const applyEmpty = (name: string) =>
  admin.createMutatingWebhookConfiguration({
    body: { metadata: { name, labels: { 'app.kubernetes.io/part-of': 'knative-prestart' } }, webhooks: [] },
  });

const exists = async (name: string) => (await admin.listMutatingWebhookConfiguration()).items.some((c) => c.metadata?.name === name);

test.serial('the gate creates no configuration: a missing one is an error that says to apply the release', async (t) => {
  names.push('knative-prestart');
  await admin.deleteMutatingWebhookConfiguration({ name: 'knative-prestart' }).catch(() => undefined);
  const err = await t.throwsAsync(
    ensureWebhookConfiguration(gate, { name: 'knative-prestart', urlBase: 'https://127.0.0.1:1111', caBundle: CA, ...NOWHERE }),
  );
  t.regex(
    err?.message ?? '',
    /MutatingWebhookConfiguration knative-prestart does not exist and the gate may not create one \(HTTP 403: .*forbidden/,
  );
  t.regex(err?.message ?? '', /apply it as the release does \(config\/400-webhooks\.yaml/);
  t.false(await exists('knative-prestart'), 'nothing was created');
});

test('an instance nobody granted: neither created nor read, and the error names the missing rule', async (t) => {
  const name = `knative-prestart-ungranted-${process.pid}`;
  names.push(name);
  const options = { name, urlBase: 'https://127.0.0.1:1111', caBundle: CA, instance: `ungranted-${process.pid}`, ...NOWHERE };
  const missing = await t.throwsAsync(ensureWebhookConfiguration(gate, options));
  t.regex(missing?.message ?? '', new RegExp(`may not read or write MutatingWebhookConfiguration ${name} \\(HTTP 403: .*forbidden`));
  t.regex(missing?.message ?? '', new RegExp(`resourceNames: \\[${name}\\], see config/300-rbac.yaml`));
  t.false(await exists(name), 'nothing was created');
  await applyEmpty(name);
  const err = await t.throwsAsync(ensureWebhookConfiguration(gate, options));
  t.regex(err?.message ?? '', new RegExp(`resourceNames: \\[${name}\\], see config/300-rbac.yaml`));
  t.deepEqual((await admin.readMutatingWebhookConfiguration({ name })).webhooks ?? [], [], 'the configuration is as it was');
});

test.serial(
  'the default instance fills in the configuration the release applied, leaves it alone when equal, and rewrites it after a move',
  async (t) => {
    names.push('knative-prestart');
    await admin.deleteMutatingWebhookConfiguration({ name: 'knative-prestart' }).catch(() => undefined);
    await applyEmpty('knative-prestart');
    const options = { name: 'knative-prestart', urlBase: 'https://127.0.0.1:3333', caBundle: CA, ...NOWHERE };
    t.is(await ensureWebhookConfiguration(gate, options), 'updated');
    t.is(await ensureWebhookConfiguration(gate, options), 'unchanged');
    t.is(await ensureWebhookConfiguration(gate, { ...options, urlBase: 'https://127.0.0.1:4444' }), 'updated');
    t.regex((await urlOf('knative-prestart')) ?? '', /:4444\//);
  },
);
