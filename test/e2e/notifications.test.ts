// "A hook failed" reaches a subscriber the Knative way: the manifests of docs/operations.md (an
// ApiServerSource on PrestartRuns and on the gate's failure Events, its ServiceAccount and Role,
// two Triggers) applied as an admin would, Knative Eventing's real ApiServerSource reconciler and
// receive adapter, MT Broker ingress, channel dispatcher and filter, and a subscriber (an HTTP
// server of this test). Stand-ins: the adapter runs as a local process with the env its
// reconciler wrote into the Deployment (no kubelet here: devcluster/knative-apiserversource.ts),
// and the service proxy stands in for cluster DNS (devcluster/knative-eventing.ts).
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { type ApiServerSources, startApiServerSources } from '@knative-prestart/devcluster/knative-apiserversource.ts';
import { type KnativeEventing, startKnativeEventing } from '@knative-prestart/devcluster/knative-eventing.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import yaml from 'js-yaml';

const DOCS = new URL('../../docs/operations.md', import.meta.url).pathname;
const BROKER = 'default';

interface Delivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

let env: GateEnv;
let eventing: KnativeEventing;
let sources: ApiServerSources;
let subscriber: Server;
const deliveries: Delivery[] = [];

/** The yaml block that follows the marker comment in docs/operations.md, for namespace `ns`. */
function documentedManifests(ns: string, subscriberUrl: string): object[] {
  const text = readFileSync(DOCS, 'utf8');
  const marker = text.indexOf('<!-- test/e2e/notifications.test.ts applies this block');
  const block = /```yaml\n([\s\S]*?)```/.exec(text.slice(marker))?.[1];
  if (marker < 0 || !block) throw new Error('docs/operations.md: no manifests block after the marker');
  const docs = yaml.loadAll(block.replaceAll('namespace: shop', `namespace: ${ns}`)) as {
    kind: string;
    metadata: { labels?: Record<string, string> };
    spec: { broker?: string; subscriber?: { uri?: string } };
  }[];
  for (const doc of docs) {
    if (doc.kind !== 'Trigger') continue;
    // What Eventing's webhook would default (none runs here), and the subscriber of this test.
    doc.metadata.labels = { 'eventing.knative.dev/broker': String(doc.spec.broker) };
    doc.spec.subscriber = { uri: String(doc.spec.subscriber?.uri).replace('http://chat-relay.shop.svc.cluster.local', subscriberUrl) };
  }
  return docs;
}

test.before(async () => {
  const progress = (line: string) => process.stderr.write(`e2e: ${line}\n`);
  env = await gateEnv('notify');
  eventing = await startKnativeEventing(env.cluster, { progress });
  sources = await startApiServerSources(env.cluster, eventing);
  await eventing.createBroker(env.namespace, BROKER);
  subscriber = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      deliveries.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') });
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => subscriber.listen(0, '127.0.0.1', resolve));
});

test.after.always(async () => {
  subscriber?.closeAllConnections();
  subscriber?.close();
  await sources?.stop();
  await eventing?.stop();
  await env?.stop();
});

test('a failing hook notifies a Trigger subscriber through ApiServerSource and the Broker', async (t) => {
  const { port } = subscriber.address() as AddressInfo;
  const manifests = documentedManifests(env.namespace, `http://127.0.0.1:${port}`);
  await applyManifests(env.admin, manifests.map((m) => JSON.stringify(m)).join('\n---\n'));
  await sources.runAdapter(env.namespace, 'prestart-notifications');
  const source = await waitFor(
    async () => {
      const res = await kubeRequest(
        env.admin,
        'GET',
        `/apis/sources.knative.dev/v1/namespaces/${env.namespace}/apiserversources/prestart-notifications`,
      );
      const conditions = (res.body as { status?: { conditions?: { type: string; status: string }[]; sinkUri?: string } }).status;
      return conditions?.conditions?.find((c) => c.type === 'SufficientPermissions' && c.status === 'True') ? conditions : undefined;
    },
    { what: 'the ApiServerSource to resolve its Broker and find its permissions sufficient', timeoutMs: 60_000 },
  );
  t.regex(String(source.sinkUri), new RegExp(`/${env.namespace}/${BROKER}$`));
  for (const trigger of ['prestart-hook-failed', 'prestart-runs']) {
    await waitFor(
      async () => {
        const res = await kubeRequest(env.admin, 'GET', `/apis/eventing.knative.dev/v1/namespaces/${env.namespace}/triggers/${trigger}`);
        return (res.body as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions?.some(
          (c) => c.type === 'Ready' && c.status === 'True',
        );
      },
      { what: `Trigger ${trigger} Ready`, timeoutMs: 60_000 },
    );
  }

  const hookName = `${env.instance}-db`;
  const hook = await startHookServer(async (req) => syncReply(req, 'failed', { message: 'the database quota is used up' }));
  t.teardown(() => hook.close());
  await env.createHook(hookName, { match: env.annotationMatch('notify', 'me'), delivery: { transport: 'http', url: hook.url } });
  await env.waitUntilStamped(hookName, { notify: 'me' });
  await env.createRevision('shop-00001', { annotations: { notify: 'me' } });

  const failed = await waitFor(() => deliveries.find((d) => d.path === '/hook-failed'), {
    what: 'the "hook failed" notification at the subscriber',
    timeoutMs: 60_000,
  });
  t.is(failed.headers['ce-type'], 'dev.knative.apiserver.resource.add');
  t.is(failed.headers['ce-kind'], 'Event');
  t.is(failed.headers['ce-namespace'], env.namespace);
  t.like(failed.body, { reason: 'HookFailed', type: 'Warning', involvedObject: { kind: 'Revision', name: 'shop-00001' } });
  t.regex(String(failed.body.message), /the database quota is used up/);
  t.regex(String(failed.body.message), /kubectl annotate prestartrun shop-00001/);

  const run = await waitFor(
    () => deliveries.find((d) => d.path === '/runs' && (d.body.status as { phase?: string } | undefined)?.phase === 'Failed'),
    { what: 'the PrestartRun update with phase Failed at the runs subscriber', timeoutMs: 60_000 },
  );
  t.is(run.headers['ce-kind'], 'PrestartRun');
  t.is((run.body.metadata as { name?: string }).name, 'shop-00001');
  t.false(
    deliveries.some((d) => d.path === '/hook-failed' && (d.body.reason as string) !== 'HookFailed'),
    'only failure Events reach the hook-failed subscriber',
  );
});
