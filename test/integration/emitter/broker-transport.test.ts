// The Broker transport against a real HTTP server standing in as the Broker ingress (the real
// Broker is exercised end to end elsewhere): address lookup and caching, retries with backoff,
// and a busy ingress that must not hold the gate.

import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import pino from 'pino';
import type { HookDelivery } from '../../../api/types.ts';
import { type BackgroundResult, createBrokerTransport } from '../../../emitter/broker.ts';
import { type Transport, TransportError } from '../../../emitter/transport.ts';
import { requestEvent } from '../../support/events.ts';
import { deferred } from '../../support/http-server.ts';
import { type FakeIngress, startFakeIngress } from './_ingress.ts';

let ingress: FakeIngress;
const silent = pino({ level: 'silent' });

test.before(async () => {
  ingress = await startFakeIngress();
});

test.after.always(async () => {
  await ingress?.close();
});

const hitsFor = (path: string) => ingress.hitsFor(path);

function brokerDelivery(name: string, url?: string): HookDelivery {
  return {
    transport: 'broker',
    broker: { name, namespace: 'shop', subscriber: { uri: 'http://hook.shop.svc/' }, ...(url ? { url } : {}) },
  };
}

function transportFor(extra: Parameters<typeof createBrokerTransport>[0] = {}): { transport: Transport; lookups: string[] } {
  const lookups: string[] = [];
  const transport = createBrokerTransport({
    resolveBrokerUrl: async (ns, name) => {
      lookups.push(`${ns}/${name}`);
      return `${ingress.url}/${ns}/${name}`;
    },
    retry: { attempts: 4, baseDelayMs: 100, maxDelayMs: 1_000, maxElapsedMs: 10_000 },
    logger: silent,
    ...extra,
  });
  return { transport, lookups };
}

test('a request goes to the Broker’s ingress in binary mode and 202 means accepted', async (t) => {
  const { transport, lookups } = transportFor();
  const event = requestEvent();
  t.deepEqual(await transport.send(event, brokerDelivery('plain'), 'db-migrate'), { type: 'accepted' });
  const [hit] = hitsFor('/shop/plain');
  t.is(hit?.headers['ce-id'], event.id);
  t.is(hit?.headers['ce-type'], 'revision.prestart.requested');
  t.is(JSON.parse(hit?.body ?? '{}').revision.name, 'checkout-00002');
  t.deepEqual(lookups, ['shop/plain']);
  await transport.close();
});

test('the resolved address is cached across sends', async (t) => {
  const { transport, lookups } = transportFor();
  await transport.send(requestEvent(), brokerDelivery('cached'), 'db-migrate');
  await transport.send(requestEvent({ attempt: 2 }), brokerDelivery('cached'), 'db-migrate');
  t.is(hitsFor('/shop/cached').length, 2);
  t.deepEqual(lookups, ['shop/cached']);
  await transport.close();
});

test('delivery.broker.url is used as given, without a lookup', async (t) => {
  const { transport, lookups } = transportFor();
  await transport.send(requestEvent(), brokerDelivery('ignored', `${ingress.url}/shop/explicit`), 'db-migrate');
  t.is(hitsFor('/shop/explicit').length, 1);
  t.deepEqual(lookups, []);
  await transport.close();
});

test('503s are retried with growing, jittered pauses until the ingress takes the request', async (t) => {
  ingress.scripted.set('/shop/flaky', [503, 503]);
  const { transport } = transportFor();
  t.deepEqual(await transport.send(requestEvent(), brokerDelivery('flaky'), 'db-migrate'), { type: 'accepted' });
  const tries = hitsFor('/shop/flaky');
  t.is(tries.length, 3);
  const [a, b, c] = tries.map((h) => h.at) as [number, number, number];
  // base 100 ms: the first pause is 50-100 ms, the second 100-200 ms.
  t.true(b - a >= 45, `first pause ${b - a} ms`);
  t.true(c - b >= 95, `second pause ${c - b} ms`);
  t.is(new Set(tries.map((h) => h.headers['ce-id'])).size, 1, 'every try carries the same CloudEvent id');
  await transport.close();
});

test('a 404 drops the cached address and looks it up again before the retry', async (t) => {
  ingress.scripted.set('/shop/moved', [404]);
  const { transport, lookups } = transportFor();
  await transport.send(requestEvent(), brokerDelivery('moved'), 'db-migrate');
  t.deepEqual(lookups, ['shop/moved', 'shop/moved']);
  t.is(hitsFor('/shop/moved').length, 2);
  await transport.close();
});

test('retries are bounded: a Broker that keeps failing gives a retriable error after the last try', async (t) => {
  ingress.scripted.set('/shop/broken', [500, 500, 500, 500, 500]);
  const { transport } = transportFor({ retry: { attempts: 3, baseDelayMs: 20, maxDelayMs: 100, maxElapsedMs: 5_000 } });
  const err = await t.throwsAsync(transport.send(requestEvent(), brokerDelivery('broken'), 'db-migrate'), { instanceOf: TransportError });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /500/);
  t.regex(err?.message ?? '', /gave up after 3 tries/);
  t.is(hitsFor('/shop/broken').length, 3);
  await transport.close();
});

test('a 400 from the ingress is not retried', async (t) => {
  ingress.scripted.set('/shop/refuses', [400]);
  const { transport } = transportFor();
  const err = await t.throwsAsync(transport.send(requestEvent(), brokerDelivery('refuses'), 'db-migrate'), { instanceOf: TransportError });
  t.false(err?.retriable);
  t.regex(err?.message ?? '', /400: status 400 from \/shop\/refuses/);
  t.is(hitsFor('/shop/refuses').length, 1);
  await transport.close();
});

test('a busy ingress (synchronous fan-out) does not hold the gate, and its late answer is still read', async (t) => {
  const late = deferred<BackgroundResult>();
  const { transport } = transportFor({ responseTimeoutMs: 200, onBackgroundResult: (r) => late.resolve(r) });
  const event = requestEvent();
  const started = Date.now();
  const outcome = await transport.send(event, brokerDelivery('busy'), 'db-migrate');
  const elapsed = Date.now() - started;
  t.deepEqual(outcome, { type: 'accepted' });
  t.true(elapsed < 2_000, `send took ${elapsed} ms`);
  // The ingress has the whole request although it has not answered (the send returns once the
  // body is written; the ingress may read it a moment later on a loaded machine).
  const hit = await waitFor(() => hitsFor('/shop/busy')[0], { timeoutMs: 5_000, what: 'the ingress to have read the request' });
  t.is(hit?.headers['ce-id'], event.id);
  t.is(JSON.parse(hit?.body ?? '{}').hook.name, 'db-migrate');
  // The connection was left open: when the subscribers are done the ingress's 202 arrives.
  ingress.held.get(event.id)?.();
  t.like(await late.promise, { status: 202, eventId: event.id, hook: 'db-migrate' });
  await transport.close();
});

test('close() ends requests still open in the background', async (t) => {
  const ended = deferred<BackgroundResult>();
  const { transport } = transportFor({ responseTimeoutMs: 100, onBackgroundResult: (r) => ended.resolve(r) });
  await transport.send(requestEvent({ hook: 'slow-hook' }), brokerDelivery('busy-closing'), 'slow-hook');
  await transport.close();
  const result = await ended.promise;
  t.is(result.status, undefined);
  t.regex(result.error ?? '', /closed/);
});

test('an ingress that refuses connections is retried, then reported as retriable', async (t) => {
  const [port] = await freePorts(1);
  const { transport } = transportFor({ retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 20, maxElapsedMs: 1_000 } });
  const err = await t.throwsAsync(transport.send(requestEvent(), brokerDelivery('x', `http://127.0.0.1:${port}/shop/x`), 'db-migrate'), {
    instanceOf: TransportError,
  });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /ECONNREFUSED/);
  await transport.close();
});

test('a lookup that fails (Broker not ready) is retriable and says so', async (t) => {
  const transport = createBrokerTransport({
    resolveBrokerUrl: async (ns, name) => {
      throw new TransportError(`Broker ${ns}/${name} has no status.address.url yet (is it Ready?)`, true);
    },
    retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 20, maxElapsedMs: 1_000 },
    logger: silent,
  });
  const err = await t.throwsAsync(transport.send(requestEvent(), brokerDelivery('unready'), 'db-migrate'), { instanceOf: TransportError });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /no status\.address\.url yet/);
  await transport.close();
});

test('a Broker announcing an audience gets the token for it; a 401 reads the address again; no token, no send', async (t) => {
  const asked: string[] = [];
  let audience = 'eventing.knative.dev/broker/shop/oidc';
  const lookups: string[] = [];
  const transport = createBrokerTransport({
    resolveBrokerUrl: async (ns, name) => {
      lookups.push(`${ns}/${name}`);
      return { url: `${ingress.url}/${ns}/${name}`, audience };
    },
    bearerFor: async (aud) => {
      asked.push(aud);
      if (aud === 'unmintable') throw new Error('apiserver unavailable');
      return `token-for-${aud.replaceAll('/', '.')}`;
    },
    retry: { attempts: 3, baseDelayMs: 50, maxDelayMs: 100, maxElapsedMs: 5_000 },
    logger: silent,
  });
  await transport.send(requestEvent(), brokerDelivery('oidc'), 'db-migrate');
  t.is(hitsFor('/shop/oidc')[0]?.headers.authorization, 'Bearer token-for-eventing.knative.dev.broker.shop.oidc');

  // The Broker was recreated with another audience: the ingress refuses the old token, the address is read again.
  ingress.scripted.set('/shop/oidc', [401]);
  audience = 'eventing.knative.dev/broker/shop/oidc-2';
  await transport.send(requestEvent({ attempt: 2 }), brokerDelivery('oidc'), 'db-migrate');
  t.deepEqual(lookups, ['shop/oidc', 'shop/oidc']);
  t.is(hitsFor('/shop/oidc').at(-1)?.headers.authorization, 'Bearer token-for-eventing.knative.dev.broker.shop.oidc-2');

  // No token to be had: nothing goes out, and the failure is retriable (the gate resends later).
  audience = 'unmintable';
  const err = await t.throwsAsync(transport.send(requestEvent({ attempt: 4 }), brokerDelivery('oidc-none'), 'db-migrate'), {
    instanceOf: TransportError,
  });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /no token for its audience unmintable: apiserver unavailable/);
  t.is(hitsFor('/shop/oidc-none').length, 0);
  await transport.close();
});
