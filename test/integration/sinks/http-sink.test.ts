// The HTTP sink on a real server, fed the way Knative's broker-filter delivers from a Trigger
// (binary or structured, with its extra headers and extensions) and the way hooks POST directly.
import test from 'ava';
import express from 'express';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { Reply } from '../../../api/types.ts';
import type { Message } from '../../../schemas/event.ts';
import { toBinary, toStructured } from '../../../schemas/index.ts';
import { installSinkRoutes } from '../../../sinks/http.ts';
import { createSinkMetrics } from '../../../sinks/metrics.ts';
import type { ReplyDisposition } from '../../../sinks/types.ts';
import { completedEvent, recordingOnReply, requestEvent } from '../../support/events.ts';
import { type Listening, listen } from '../../support/http-server.ts';
import { foreignKeys, keys } from '../../support/keys.ts';

const servers: Listening[] = [];
test.after.always(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

async function sink(answer?: (reply: Reply) => Promise<ReplyDisposition> | ReplyDisposition, maxBytes?: number) {
  const { seen, onReply } = recordingOnReply(answer);
  const registry = new Registry();
  const app = express();
  installSinkRoutes(app, { keys, onReply, logger: pino({ level: 'silent' }), metrics: createSinkMetrics(registry), maxBytes });
  const server = await listen(app);
  servers.push(server);
  return { url: server.url, seen, registry };
}

/** What Knative's broker-filter adds when it delivers an event to a Trigger's subscriber. */
const FILTER_HEADERS = {
  'ce-knativearrivaltime': '2025-06-01T10:00:00.123Z',
  'ce-knativebrokerttl': '255',
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  prefer: 'reply',
  'kn-namespace': 'shop',
};

function post(url: string, message: Message, extra: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { ...message.headers, ...extra },
    body: typeof message.body === 'string' ? message.body : new Uint8Array(message.body),
  });
}

async function expectEmpty202(t: import('ava').ExecutionContext, res: Response) {
  t.is(res.status, 202);
  t.is(await res.text(), '', '2xx answers carry no body (Knative would forward it as a reply)');
  t.is(res.headers.get('content-type'), null);
}

async function errorOf(res: Response): Promise<string> {
  const body = (await res.json()) as { error?: unknown };
  return String(body.error);
}

test('binary mode from a Trigger, with the broker-filter’s headers: 202, empty, and the gate gets the verified reply', async (t) => {
  const { url, seen } = await sink();
  const reply = completedEvent(requestEvent({ hook: 'db-migrate', attempt: 2 }), { outcome: 'failed', message: 'lock timeout' });
  const res = await post(`${url}/`, toBinary(reply), FILTER_HEADERS);
  await expectEmpty202(t, res);
  t.is(seen.length, 1);
  t.like(seen[0], {
    namespace: 'shop',
    revision: 'checkout-00002',
    hook: 'db-migrate',
    attempt: 2,
    outcome: 'failed',
    message: 'lock timeout',
  });
});

test('structured mode with Knative extensions in the document, POSTed to /events', async (t) => {
  const { url, seen } = await sink();
  const event = { ...completedEvent(), knativearrivaltime: '2025-06-01T10:00:00Z', knativebrokerttl: 255 };
  const res = await post(`${url}/events`, toStructured(event), { traceparent: FILTER_HEADERS.traceparent });
  await expectEmpty202(t, res);
  t.is(seen.length, 1);
  t.is(seen[0]?.outcome, 'succeeded');
});

test('a duplicate is answered 2xx (so the Broker stops redelivering)', async (t) => {
  const { url, seen } = await sink(() => ({ type: 'duplicate' }));
  await expectEmpty202(t, await post(`${url}/`, toBinary(completedEvent())));
  t.is(seen.length, 1);
});

test('a reply the gate rejects (stale attempt) is a 422 with the reason', async (t) => {
  const { url } = await sink(() => ({ type: 'rejected', reason: 'attempt 1 is stale: the hook is on attempt 2' }));
  const res = await post(`${url}/`, toBinary(completedEvent()));
  t.is(res.status, 422);
  t.regex(await errorOf(res), /attempt 1 is stale/);
});

test('a transient failure in the gate is a 503, and the same event sent again is taken', async (t) => {
  let calls = 0;
  const { url, seen } = await sink(() => {
    calls += 1;
    if (calls === 1) throw new Error('apiserver unavailable');
    return { type: 'applied' };
  });
  const event = completedEvent();
  const first = await post(`${url}/`, toBinary(event));
  t.is(first.status, 503);
  t.regex(await errorOf(first), /send it again/);
  await expectEmpty202(t, await post(`${url}/`, toBinary(event)));
  t.is(seen.length, 2);
});

// Bad input: refused with the right status, and the gate never sees it.
const badInputs: { title: string; status: number; message: () => Message; match: RegExp }[] = [
  {
    title: 'a replyid minted with another key (forged)',
    status: 403,
    message: () => toBinary(completedEvent(requestEvent({ ring: foreignKeys }))),
    match: /replyid/,
  },
  {
    title: 'a reply without replyid',
    status: 400,
    message: () => {
      const m = toBinary(completedEvent());
      delete m.headers['ce-replyid'];
      return m;
    },
    match: /missing replyid/,
  },
  {
    title: 'binary mode with a body that is not JSON',
    status: 400,
    message: () => ({ ...toBinary(completedEvent()), body: '{"outcome": "succ' }),
    match: /not valid JSON/,
  },
  {
    title: 'binary mode without ce-id',
    status: 400,
    message: () => {
      const m = toBinary(completedEvent());
      delete m.headers['ce-id'];
      return m;
    },
    match: /missing required attribute id/,
  },
  {
    title: 'data that breaks the schema',
    status: 422,
    message: () => ({ ...toBinary(completedEvent()), body: JSON.stringify({ outcome: 'maybe' }) }),
    match: /outcome/,
  },
  {
    title: 'a request event posted to the sink',
    status: 400,
    message: () => toBinary(requestEvent()),
    match: /expected "revision\.prestart\.completed"/,
  },
  {
    title: 'a batch',
    status: 415,
    message: () => ({
      headers: { 'content-type': 'application/cloudevents-batch+json' },
      body: JSON.stringify([JSON.parse(String(toStructured(completedEvent()).body))]),
    }),
    match: /batch/,
  },
  {
    title: 'plain JSON that is not a CloudEvent',
    status: 400,
    message: () => ({ headers: { 'content-type': 'application/json' }, body: '{"outcome":"succeeded"}' }),
    match: /not a CloudEvent/,
  },
  {
    title: 'an empty POST',
    status: 400,
    message: () => ({ headers: {}, body: '' }),
    match: /not a CloudEvent/,
  },
];

for (const bad of badInputs) {
  test(`${bad.title} is refused with ${bad.status} and never reaches the gate`, async (t) => {
    const { url, seen, registry } = await sink();
    const res = await post(`${url}/`, bad.message());
    t.is(res.status, bad.status);
    t.regex(await errorOf(res), bad.match);
    t.is(seen.length, 0);
    t.regex(await registry.metrics(), /prestart_gate_replies_total\{transport="http",result="invalid",outcome="unknown"\} 1/);
  });
}

test('a body over the size limit is refused with 413 before it is parsed', async (t) => {
  const { url, seen } = await sink(undefined, 2048);
  const event = completedEvent(requestEvent(), { message: 'x'.repeat(3000) });
  const res = await post(`${url}/`, toBinary(event));
  t.is(res.status, 413);
  t.regex(await errorOf(res), /larger than the 2048-byte limit/);
  t.is(seen.length, 0);
});

test('counters by outcome land on the registry the gate passes in', async (t) => {
  const { url, registry } = await sink();
  await post(`${url}/`, toBinary(completedEvent()));
  await post(`${url}/`, toBinary(completedEvent(requestEvent({ ring: foreignKeys }))));
  const text = await registry.metrics();
  t.regex(text, /prestart_gate_replies_total\{transport="http",result="applied",outcome="succeeded"\} 1/);
  t.regex(text, /prestart_gate_replies_total\{transport="http",result="invalid",outcome="unknown"\} 1/);
});

test('/healthz answers 200', async (t) => {
  const { url } = await sink();
  const res = await fetch(`${url}/healthz`);
  t.is(res.status, 200);
  t.is(await res.text(), 'ok');
});
