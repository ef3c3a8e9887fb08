// The TypeScript example hook's Secret, against the real apiserver: created once with the
// credentials it binds, never rotated by a resent request, and a hook without RBAC answers
// `failed` with the API's refusal instead of releasing a Revision whose Secret does not exist.
import { randomBytes } from 'node:crypto';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { sharedCluster } from '@knative-prestart/devcluster/shared.ts';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import { provisionDatabase } from '../../../examples/typescript-binding-hook/index.ts';
import { credentials, kubernetesSecrets } from '../../../examples/typescript-binding-hook/secrets.ts';
import type { HookContext, HookRequest } from '../../../hooks/index.ts';

let cluster: Cluster;
let core: CoreV1Api;
const namespace = `ts-example-${randomBytes(3).toString('hex')}`;

test.before(async () => {
  cluster = await sharedCluster();
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});

test.after.always(async () => {
  await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
});

/** The parts of a request and context the example reads; the SDK builds the real ones from a CloudEvent. */
function request(secretName: string): HookRequest {
  return {
    hook: 'provision-db',
    revision: { namespace, name: 'orders-00001', uid: 'u', service: 'orders', labels: {}, annotations: {}, images: [] },
    params: { secretName },
    attempt: 1,
    deadline: new Date(Date.now() + 60_000),
    allowedContributions: ['env', 'volume'],
  } as unknown as HookRequest;
}

const context: HookContext = {
  signal: new AbortController().signal,
  progress: async () => {},
  logger: pino({ level: 'silent' }),
};

test('the first request creates the Secret the binding names; a resent one keeps its credentials', async (t) => {
  const handler = provisionDatabase(0, kubernetesSecrets(cluster.kubeConfig));
  const first = await handler(request('orders-db'), context);
  t.true(first.succeeded);
  const created = await core.readNamespacedSecret({ namespace, name: 'orders-db' });
  const password = Buffer.from(created.data?.password ?? '', 'base64').toString();
  t.true(password.length >= 20, 'a generated password');
  t.regex(Buffer.from(created.data?.uri ?? '', 'base64').toString(), /^postgres:\/\/app:.+@orders\./);
  t.deepEqual(first.succeeded && first.contributions?.map((c) => [c.as, c.secretName]), [
    ['env', 'orders-db'],
    ['volume', 'orders-db'],
  ]);

  const again = await handler(request('orders-db'), context);
  t.true(again.succeeded);
  const after = await core.readNamespacedSecret({ namespace, name: 'orders-db' });
  t.is(after.metadata?.resourceVersion, created.metadata?.resourceVersion, 'the Secret was not rewritten');
  t.is(await kubernetesSecrets(cluster.kubeConfig).ensure(namespace, 'orders-db', credentials('orders', namespace)), 'existing');
});

test('a hook that may not create Secrets answers failed with the refusal, and nothing is created', async (t) => {
  const nobody = new KubeConfig();
  nobody.loadFromFile(await cluster.mintUserKubeconfig('system:serviceaccount:hooks:provision-db'));
  const outcome = await provisionDatabase(0, kubernetesSecrets(nobody))(request('billing-db'), context);
  t.false(outcome.succeeded);
  t.regex(outcome.message ?? '', new RegExp(`cannot store the credentials in Secret ${namespace}/billing-db: .*forbidden`, 'i'));
  await t.throwsAsync(core.readNamespacedSecret({ namespace, name: 'billing-db' }));
});
