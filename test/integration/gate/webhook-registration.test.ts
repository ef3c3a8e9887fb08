// The gate writes its own MutatingWebhookConfiguration under its service account's RBAC
// (config/300-rbac.yaml): it creates one, leaves an equal one alone, rewrites a stale one it may
// write, and, where RBAC does not let it (an instance nobody granted), says which rule is missing
// and changes nothing.
import { AdmissionregistrationV1Api, KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import { GATE_GROUPS, GATE_USER, installedCluster } from '../../../devcluster/gate/env.ts';
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

test('an instance nobody granted: created, unchanged when equal, and a refused update names the missing rule', async (t) => {
  const name = `knative-prestart-ungranted-${process.pid}`;
  names.push(name);
  const options = { name, urlBase: 'https://127.0.0.1:1111', caBundle: CA, instance: `ungranted-${process.pid}`, ...NOWHERE };
  t.is(await ensureWebhookConfiguration(gate, options), 'created', 'create is not limited by name');
  t.is(await ensureWebhookConfiguration(gate, options), 'unchanged');
  const err = await t.throwsAsync(ensureWebhookConfiguration(gate, { ...options, urlBase: 'https://127.0.0.1:2222' }));
  t.regex(err?.message ?? '', new RegExp(`may not write MutatingWebhookConfiguration ${name} \\(HTTP 403: .*forbidden`));
  t.regex(err?.message ?? '', new RegExp(`resourceNames: \\[${name}\\], see config/300-rbac.yaml`));
  t.regex((await urlOf(name)) ?? '', /:1111\//, 'the configuration is as it was');
});

test('the default instance may rewrite its configuration (a new URL, as after a move)', async (t) => {
  names.push('knative-prestart');
  const options = { name: 'knative-prestart', urlBase: 'https://127.0.0.1:3333', caBundle: CA, ...NOWHERE };
  await ensureWebhookConfiguration(gate, options);
  t.is(await ensureWebhookConfiguration(gate, { ...options, urlBase: 'https://127.0.0.1:4444' }), 'updated');
  t.regex((await urlOf('knative-prestart')) ?? '', /:4444\//);
});
