import test from 'ava';
import {
  buildRequested,
  EXT_ATTEMPT,
  EXT_CORRELATION_ID,
  EXT_HOOK,
  KeyRing,
  parseRequested,
  REQUESTED_TYPE,
  toBinary,
  toStructured,
} from '../../../schemas/index.ts';
import { deadline, hook, revision, runUID } from '../../support/fixtures.ts';
import { keys } from '../../support/keys.ts';

const start = () => buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', keys });

test('a start request carries the attributes hooks and Trigger filters rely on', (t) => {
  const time = new Date('2025-06-01T12:00:00Z');
  const event = buildRequested({ revision, runUID, hook, attempt: 2, deadline, action: 'start', keys, time, traceparent: '00-abc-def-01' });
  t.like(event, {
    specversion: '1.0',
    id: `${runUID}/db-migrate/2`,
    source: '/apis/prestart.dev/v1alpha1/namespaces/shop/gate',
    type: REQUESTED_TYPE,
    subject: 'shop/checkout-00002',
    time: '2025-06-01T12:00:00.000Z',
    datacontenttype: 'application/json',
    [EXT_HOOK]: 'db-migrate',
    [EXT_ATTEMPT]: 2,
    traceparent: '00-abc-def-01',
  });
  t.deepEqual(keys.verify(event[EXT_CORRELATION_ID]), {
    namespace: 'shop',
    revision: 'checkout-00002',
    revisionUID: revision.uid,
    runUID,
    hook: 'db-migrate',
    attempt: 2,
  });
  t.false('traceparent' in start());
});

test('the data describes the Revision, the hook and what it may contribute', (t) => {
  t.deepEqual(start().data, {
    action: 'start',
    revision: {
      namespace: 'shop',
      name: 'checkout-00002',
      uid: revision.uid,
      service: 'checkout',
      configuration: 'checkout',
      labels: revision.labels,
      annotations: revision.annotations,
      images: revision.images,
    },
    hook: { name: 'db-migrate', params: { database: 'orders' } },
    attempt: 1,
    deadline,
    contributions: { allowed: ['env', 'volume'] },
  });
});

test('a resend has the same id and correlationid, so hooks can dedupe it', (t) => {
  const first = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', keys, time: new Date(1) });
  const resend = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', keys, time: new Date(60_000) });
  t.is(resend.id, first.id);
  t.is(resend[EXT_CORRELATION_ID], first[EXT_CORRELATION_ID]);
  t.not(resend.time, first.time);
  const retry = buildRequested({ revision, runUID, hook, attempt: 2, deadline, action: 'start', keys });
  t.not(retry.id, first.id);
});

test('a cancel is a request with action "cancel", a reason and its own id', (t) => {
  const event = buildRequested({ revision, runUID, hook, attempt: 1, action: 'cancel', reason: 'Revision deleted', keys });
  t.is(event.type, REQUESTED_TYPE);
  t.is(event.id, `${runUID}/db-migrate/1/cancel`);
  t.like(event.data, { action: 'cancel', reason: 'Revision deleted', attempt: 1 });
  t.false('deadline' in (event.data as object));
  t.is(event[EXT_CORRELATION_ID], start()[EXT_CORRELATION_ID]);
});

test('source and replyTo can be configured; params default to {}', (t) => {
  const event = buildRequested({
    revision,
    runUID,
    hook: { ...hook, params: undefined },
    attempt: 1,
    deadline: new Date(deadline),
    action: 'start',
    keys,
    source: 'https://gate.example/prestart',
    replyTo: 'https://gate.example/replies',
  });
  t.is(event.source, 'https://gate.example/prestart');
  t.like(event.data, { replyTo: 'https://gate.example/replies', deadline, hook: { name: 'db-migrate', params: {} } });
});

test('a request that would break the schema is a bug and throws', (t) => {
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, action: 'cancel', keys }), {
    message: 'buildRequested: data: action "cancel" needs a reason',
  });
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, action: 'start', keys }), { message: /needs a deadline/ });
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, deadline: 'soon', action: 'start', keys }), {
    message: /data\/deadline must match format "date-time"/,
  });
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', keys, replyTo: 'not a uri' }), {
    message: /data\/replyTo/,
  });
  t.throws(() => buildRequested({ revision, runUID, hook: { ...hook, name: 'DB' }, attempt: 1, deadline, action: 'start', keys }), {
    message: /data\/hook\/name must be a DNS-1123 subdomain/,
  });
});

test("the event does not share state with the caller's Revision", (t) => {
  const labels = { app: 'checkout' };
  const event = buildRequested({ revision: { ...revision, labels }, hook, runUID, attempt: 1, deadline, action: 'start', keys });
  labels.app = 'changed';
  t.like(event.data, { revision: { labels: { app: 'checkout' } } });
});

test('a hook reads the request back from either mode', (t) => {
  const event = start();
  for (const message of [toBinary(event), toStructured(event)]) {
    const result = parseRequested(message);
    t.true(result.ok);
    if (!result.ok) continue;
    t.deepEqual(result.request.data, event.data);
    t.like(result.request, {
      correlationid: event[EXT_CORRELATION_ID],
      hook: 'db-migrate',
      attempt: 1,
      subject: 'shop/checkout-00002',
      key: `${event.source}#${event.id}`,
    });
  }
});

test('a request with Revision annotations near the Kubernetes limit fits the default bound', (t) => {
  const annotations = { big: 'x'.repeat(250 * 1024) };
  const event = buildRequested({ revision: { ...revision, annotations }, runUID, hook, attempt: 1, deadline, action: 'start', keys });
  t.true(parseRequested(toBinary(event)).ok);
  const small = parseRequested(toBinary(event), { maxBytes: 64 * 1024 });
  t.false(small.ok);
  if (!small.ok) t.is(small.error.code, 'too-large');
});

test('a hook does not need the key to read a request', (t) => {
  const other = new KeyRing([KeyRing.generateKey()]);
  const event = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', keys: other });
  t.true(parseRequested(toBinary(event)).ok);
});

test('parseRequested refuses a reply and an attempt that contradicts the data', (t) => {
  const event = start();
  const reply = parseRequested(toBinary({ ...event, type: 'revision.prestart.completed' }));
  t.false(reply.ok);
  if (!reply.ok) t.is(reply.error.code, 'wrong-type');
  const attempt = parseRequested(toBinary({ ...event, [EXT_ATTEMPT]: 5 }));
  t.false(attempt.ok);
  if (!attempt.ok) t.is(attempt.error.reason, 'prestartattempt 5 differs from data.attempt 1');
});

test('newer gates may add data members without breaking older hooks', (t) => {
  const event = start();
  const result = parseRequested(toBinary({ ...event, data: { ...(event.data as object), futureField: { x: 1 } } }));
  t.true(result.ok);
});
