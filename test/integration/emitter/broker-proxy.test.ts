// The Broker transport through a real HTTP forward proxy on 127.0.0.1, the way a gate reaches a
// cluster-local Broker address (broker-ingress.knative-eventing.svc.cluster.local, which does not
// resolve here) from outside the cluster network or behind an egress proxy.

import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { type ServiceProxy, startServiceProxy, type Upstream } from '@knative-prestart/devcluster/service-proxy.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import pino from 'pino';
import type { HookDelivery } from '../../../api/types.ts';
import { type BackgroundResult, type BrokerTransportOptions, createBrokerTransport } from '../../../emitter/broker.ts';
import { TransportError } from '../../../emitter/transport.ts';
import { requestEvent } from '../../support/events.ts';
import { deferred } from '../../support/http-server.ts';
import { type FakeIngress, startFakeIngress } from './_ingress.ts';

const INGRESS_HOST = 'broker-ingress.knative-eventing.svc.cluster.local';

let ingress: FakeIngress;
/** Forwards every name to the fake ingress: cluster DNS, as far as the gate can tell. */
let proxy: ServiceProxy;
/** Forwards to a port nothing listens on: the proxy's answer is its own 502. */
let deadEndProxy: ServiceProxy;
const silent = pino({ level: 'silent' });

/** The suite's cluster-DNS stand-in (devcluster/service-proxy.ts), routing every name to `upstream`. */
const proxyTo = (upstream: Upstream) => startServiceProxy({ route: () => upstream });

test.before(async () => {
  ingress = await startFakeIngress();
  proxy = await proxyTo({ host: '127.0.0.1', port: Number(new URL(ingress.url).port) });
  const [closedPort] = await freePorts(1);
  deadEndProxy = await proxyTo({ host: '127.0.0.1', port: closedPort ?? 1 });
});

test.after.always(async () => {
  await Promise.all([ingress?.close(), proxy?.close(), deadEndProxy?.close()]);
});

const hitsFor = (path: string) => ingress.hitsFor(path);
const forwardedFor = (p: ServiceProxy, path: string) => p.forwarded.filter((f) => new URL(f.target).pathname === path);

function brokerDelivery(name: string, url?: string): HookDelivery {
  return {
    transport: 'broker',
    broker: { name, namespace: 'shop', subscriber: { uri: 'http://hook.shop.svc/' }, ...(url ? { url } : {}) },
  };
}

/** A transport whose lookups answer the cluster-local ingress address, as a real Broker's status does. */
function transportFor(extra: BrokerTransportOptions = {}) {
  const lookups: string[] = [];
  const transport = createBrokerTransport({
    resolveBrokerUrl: async (ns, name) => {
      lookups.push(`${ns}/${name}`);
      return `http://${INGRESS_HOST}/${ns}/${name}`;
    },
    retry: { attempts: 3, baseDelayMs: 20, maxDelayMs: 100, maxElapsedMs: 5_000 },
    logger: silent,
    ...extra,
  });
  return { transport, lookups };
}

/** Sets the proxy variables for one test and puts back what was there; serial tests only. */
async function withEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const names = ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy'];
  const saved = new Map(names.map((n) => [n, process.env[n]]));
  for (const n of names) delete process.env[n];
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [n, v] of saved) {
      if (v === undefined) delete process.env[n];
      else process.env[n] = v;
    }
  }
}

test('with a proxy, a cluster-local Broker address is reached through it with the CloudEvent intact', async (t) => {
  const { transport } = transportFor({ proxy: proxy.url });
  const event = requestEvent();
  t.deepEqual(await transport.send(event, brokerDelivery('default'), 'db-migrate'), { type: 'accepted' });
  const [through] = forwardedFor(proxy, '/shop/default');
  t.is(through?.target, `http://${INGRESS_HOST}/shop/default`);
  const [hit] = hitsFor('/shop/default');
  t.is(hit?.headers.host, INGRESS_HOST);
  t.is(hit?.headers['ce-id'], event.id);
  t.is(hit?.headers['ce-type'], 'revision.prestart.requested');
  t.is(hit?.headers['ce-specversion'], '1.0');
  t.is(hit?.headers['ce-source'], event.source);
  t.is(JSON.parse(hit?.body ?? '{}').revision.name, 'checkout-00002');
  await transport.close();
});

test.serial('by default HTTP_PROXY decides (lower case too), and NO_PROXY covering the name sends direct', async (t) => {
  const { transport } = transportFor();
  await withEnv({ http_proxy: proxy.url }, () => transport.send(requestEvent(), brokerDelivery('env-proxied'), 'db-migrate'));
  t.is(forwardedFor(proxy, '/shop/env-proxied').length, 1);
  t.is(hitsFor('/shop/env-proxied').length, 1);

  // Direct means the gate's own DNS: the cluster-local name does not resolve here.
  const err = await withEnv({ HTTP_PROXY: proxy.url, NO_PROXY: 'localhost,.svc.cluster.local' }, () =>
    t.throwsAsync(transport.send(requestEvent(), brokerDelivery('env-direct'), 'db-migrate'), { instanceOf: TransportError }),
  );
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /ENOTFOUND|EAI_AGAIN/);
  t.notRegex(err?.message ?? '', /proxy/);
  t.is(forwardedFor(proxy, '/shop/env-direct').length, 0);
  await transport.close();
});

test.serial('the explicit option overrides the environment', async (t) => {
  const { transport } = transportFor({ proxy: proxy.url });
  await withEnv({ HTTP_PROXY: deadEndProxy.url, NO_PROXY: '.svc.cluster.local' }, () =>
    transport.send(requestEvent(), brokerDelivery('overridden'), 'db-migrate'),
  );
  t.is(forwardedFor(proxy, '/shop/overridden').length, 1);
  t.is(forwardedFor(deadEndProxy, '/shop/overridden').length, 0);
  await transport.close();
});

test('a 127.0.0.1 ingress is reached directly even with a proxy configured', async (t) => {
  const { transport } = transportFor({ proxy: proxy.url });
  await transport.send(requestEvent(), brokerDelivery('local', `${ingress.url}/shop/local`), 'db-migrate');
  t.is(hitsFor('/shop/local').length, 1);
  t.is(forwardedFor(proxy, '/shop/local').length, 0);
  await transport.close();
});

test('a proxy answering 502 is retried, then reported as retriable naming the proxy', async (t) => {
  const { transport } = transportFor({ proxy: deadEndProxy.url });
  const err = await t.throwsAsync(transport.send(requestEvent(), brokerDelivery('unroutable'), 'db-migrate'), {
    instanceOf: TransportError,
  });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', new RegExp(`502 via proxy ${deadEndProxy.url}|via proxy ${deadEndProxy.url} answered 502`));
  t.regex(err?.message ?? '', /gave up after 3 tries/);
  t.is(forwardedFor(deadEndProxy, '/shop/unroutable').length, 3);
  await transport.close();
});

test('a proxy that refuses connections is retriable and named in the reason', async (t) => {
  const [port] = await freePorts(1);
  const { transport } = transportFor({ proxy: `http://127.0.0.1:${port}` });
  const err = await t.throwsAsync(transport.send(requestEvent(), brokerDelivery('no-proxy-there'), 'db-migrate'), {
    instanceOf: TransportError,
  });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /ECONNREFUSED/);
  t.true(err?.message.includes(`via proxy http://127.0.0.1:${port}`), err?.message);
  await transport.close();
});

test('through the proxy a 404 still drops the cached address and looks it up again', async (t) => {
  ingress.scripted.set('/shop/moved', [404]);
  const { transport, lookups } = transportFor({ proxy: proxy.url });
  t.deepEqual(await transport.send(requestEvent(), brokerDelivery('moved'), 'db-migrate'), { type: 'accepted' });
  t.deepEqual(lookups, ['shop/moved', 'shop/moved']);
  t.is(forwardedFor(proxy, '/shop/moved').length, 2);
  await transport.close();
});

test('through the proxy a busy ingress does not hold the gate, and its late answer is still read', async (t) => {
  const late = deferred<BackgroundResult>();
  const { transport } = transportFor({ proxy: proxy.url, responseTimeoutMs: 200, onBackgroundResult: (r) => late.resolve(r) });
  const event = requestEvent();
  const started = Date.now();
  t.deepEqual(await transport.send(event, brokerDelivery('busy'), 'db-migrate'), { type: 'accepted' });
  const elapsed = Date.now() - started;
  t.true(elapsed < 2_000, `send took ${elapsed} ms`);
  // The send returned at its response timeout: under load the ingress may read the request later.
  const hit = await waitFor(() => hitsFor('/shop/busy')[0], { timeoutMs: 5_000, what: 'the ingress to have read the request' });
  t.is(JSON.parse(hit.body ?? '{}').hook.name, 'db-migrate');
  ingress.held.get(event.id)?.();
  t.like(await late.promise, { status: 202, eventId: event.id });
  await transport.close();
});

test('close() closes the pooled connections to the proxy', async (t) => {
  const own = await proxyTo({ host: '127.0.0.1', port: Number(new URL(ingress.url).port) });
  t.teardown(() => own.close());
  const { transport } = transportFor({ proxy: own.url });
  await transport.send(requestEvent(), brokerDelivery('pooled'), 'db-migrate');
  // Kept alive after the answer: the pool holds it for the next request.
  t.is(await own.connections(), 1);
  await transport.close();
  await waitFor(async () => (await own.connections()) === 0, { what: 'the proxy connection to close', timeoutMs: 3_000 });
  t.pass();
});
