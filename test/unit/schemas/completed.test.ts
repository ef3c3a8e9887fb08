import test from 'ava';
import type { CloudEventRecord } from '../../../schemas/event.ts';
import type { ContractError } from '../../../schemas/index.ts';
import {
  buildCompleted,
  buildRequested,
  COMPLETED_TYPE,
  EXT_ATTEMPT,
  EXT_CORRELATION_ID,
  EXT_HOOK,
  EXT_REPLY_ID,
  KeyRing,
  parseCompleted,
  parseRequested,
  toBinary,
  toStructured,
} from '../../../schemas/index.ts';
import { containers } from '../../support/events.ts';
import { deadline, hook, revision, runUID } from '../../support/fixtures.ts';
import { keys } from '../../support/keys.ts';

const HOOK_SOURCE = '/apis/serving.knative.dev/v1/namespaces/shop/services/db-migrate-hook';
const request = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', containers, keys });
const identity = {
  namespace: 'shop',
  revision: 'checkout-00002',
  revisionUID: revision.uid,
  runUID,
  hook: 'db-migrate',
  attempt: 1,
};

function refusal(event: CloudEventRecord, options: { maxBytes?: number; keys?: KeyRing } = {}): ContractError {
  const result = parseCompleted(toBinary(event), { keys: options.keys ?? keys, maxBytes: options.maxBytes });
  if (result.ok) throw new Error('the reply was accepted');
  return result.error;
}

test('a reply echoes the request: replyid, hook, attempt and subject', (t) => {
  const reply = buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE, id: 'r1', time: new Date(0) });
  t.deepEqual(reply, {
    specversion: '1.0',
    id: 'r1',
    source: HOOK_SOURCE,
    type: COMPLETED_TYPE,
    time: '1970-01-01T00:00:00.000Z',
    datacontenttype: 'application/json',
    subject: 'shop/checkout-00002',
    [EXT_REPLY_ID]: request[EXT_CORRELATION_ID],
    [EXT_HOOK]: 'db-migrate',
    [EXT_ATTEMPT]: 1,
    data: { outcome: 'succeeded' },
  });
});

test('the whole loop: the gate sends, a hook answers, the sink verifies, in both modes', (t) => {
  const contributions = [{ name: 'orders-db', secretName: 'orders-db-app', as: 'env' as const, env: { DATABASE_URL: 'uri' } }];
  for (const encode of [toBinary, toStructured]) {
    const received = parseRequested(encode(request));
    if (!received.ok) return t.fail(received.error.reason);
    const answer = buildCompleted({
      request: received.request,
      outcome: 'succeeded',
      message: 'migrated',
      contributions,
      source: HOOK_SOURCE,
      id: 'answer-1',
    });
    const result = parseCompleted(encode(answer), { keys });
    if (!result.ok) return t.fail(result.error.reason);
    t.deepEqual(result.reply, {
      ...identity,
      outcome: 'succeeded',
      message: 'migrated',
      contributions,
      eventKey: `${HOOK_SOURCE}#answer-1`,
    });
  }
});

test('progress reports carry message and percentage', (t) => {
  const answer = buildCompleted({ request, outcome: 'progress', message: '3 of 7', progress: 42, source: HOOK_SOURCE });
  const result = parseCompleted(toBinary(answer), { keys });
  t.true(result.ok);
  if (result.ok) t.like(result.reply, { outcome: 'progress', message: '3 of 7', progress: 42 });
});

test('reply ids are fresh unless the hook gives a stable one', (t) => {
  const a = buildCompleted({ request, outcome: 'failed', source: HOOK_SOURCE });
  const b = buildCompleted({ request, outcome: 'failed', source: HOOK_SOURCE });
  t.not(a.id, b.id);
  t.is(buildCompleted({ request, outcome: 'failed', source: HOOK_SOURCE, id: 'x' }).id, 'x');
});

test('a replayed reply parses to the same Reply and event key, so the state can see the duplicate', (t) => {
  const message = toBinary(buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE }));
  const first = parseCompleted(message, { keys });
  const again = parseCompleted(message, { keys });
  t.true(first.ok && again.ok);
  if (first.ok && again.ok) t.deepEqual(again.reply, first.reply);
});

test('the reply identity comes from the verified replyid, never from other attributes', (t) => {
  const answer = buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE });
  const { [EXT_HOOK]: _h, [EXT_ATTEMPT]: _a, ...bare } = answer;
  const lying = { ...bare, subject: 'bank/payments-00001', namespace: 'bank', revision: 'payments-00001' };
  const result = parseCompleted(toBinary(lying), { keys });
  t.true(result.ok);
  if (result.ok) t.like(result.reply, identity);
});

test('replies the gate did not ask for are refused with 403', (t) => {
  const attacker = new KeyRing([KeyRing.generateKey()]);
  const forgedRequest = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', containers, keys: attacker });
  const forged = buildCompleted({ request: forgedRequest, outcome: 'succeeded', source: HOOK_SOURCE });
  t.like(refusal(forged), { code: 'bad-replyid', status: 403 });
  const answer = buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE });
  t.like(refusal({ ...answer, [EXT_REPLY_ID]: 'guess' }), { code: 'bad-replyid', status: 403 });
  const { [EXT_REPLY_ID]: _, ...missing } = answer;
  t.like(refusal(missing), { code: 'bad-replyid', status: 400 });
});

test('a reply whose hook or attempt contradicts its replyid is refused', (t) => {
  const answer = buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE });
  t.deepEqual(refusal({ ...answer, [EXT_HOOK]: 'cache' }), {
    code: 'hook-mismatch',
    status: 422,
    reason: 'prestarthook "cache" differs from hook "db-migrate" of the replyid',
  });
  t.like(refusal({ ...answer, [EXT_ATTEMPT]: 2 }), { code: 'hook-mismatch' });
});

test('a request sent to the sink is the wrong type', (t) => {
  t.like(refusal(request), { code: 'wrong-type', status: 400 });
});

test('invalid data is refused with 422 and says what is wrong', (t) => {
  const answer = buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE });
  t.deepEqual(refusal({ ...answer, data: { outcome: 'progress', progress: -1 } }), {
    code: 'invalid-data',
    status: 422,
    reason: 'data/progress must be >= 0',
  });
  t.like(refusal({ ...answer, data: undefined }), { code: 'invalid-data', reason: 'data must be object' });
  t.like(refusal({ ...answer, data: [] }), { code: 'invalid-data' });
});

test('data sent as a JSON string (stringified twice) is still read', (t) => {
  const answer = buildCompleted({ request, outcome: 'failed', message: 'no', source: HOOK_SOURCE });
  const twice = { ...answer, data: JSON.stringify(answer.data) };
  const result = parseCompleted(toStructured(twice), { keys });
  t.true(result.ok);
  if (result.ok) t.like(result.reply, { outcome: 'failed', message: 'no' });
});

test('replies are bounded at 64 KiB unless the sink says otherwise', (t) => {
  const answer = buildCompleted({ request, outcome: 'failed', source: HOOK_SOURCE });
  const big = { ...answer, data: { outcome: 'failed', padding: 'x'.repeat(70 * 1024) } };
  t.like(refusal(big), { code: 'too-large', status: 413 });
  t.like(refusal(big, { maxBytes: 1024 * 1024 }), { code: 'invalid-data' });
});

test('a reply delivered by a Broker Trigger, with what Knative adds, is accepted', (t) => {
  const { headers, body } = toBinary(buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE }));
  const delivered = {
    ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.replace(/^ce-/, 'Ce-'), v])),
    'ce-knativearrivaltime': '2025-06-01T12:00:01.5Z',
    'ce-knativebrokerttl': '254',
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    prefer: 'reply',
  };
  t.true(parseCompleted({ headers: delivered, body }, { keys }).ok);
});

test('the key ring rotates without losing replies in flight', (t) => {
  const newKey = KeyRing.generateKey();
  const rotated = new KeyRing([newKey, Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex')]);
  const inFlight = buildCompleted({ request, outcome: 'succeeded', source: HOOK_SOURCE });
  t.true(parseCompleted(toBinary(inFlight), { keys: rotated }).ok);
  t.like(refusal(inFlight, { keys: new KeyRing([newKey]) }), { code: 'bad-replyid' });
});

test('a hook cannot build an invalid reply', (t) => {
  t.throws(() => buildCompleted({ request, outcome: 'progress', progress: 101, source: HOOK_SOURCE }), {
    message: 'buildCompleted: data/progress must be <= 100',
  });
  t.throws(
    () =>
      buildCompleted({
        request,
        outcome: 'failed',
        contributions: [{ name: 'db', secretName: 'db', as: 'volume' }],
        source: HOOK_SOURCE,
      }),
    { message: /only allowed with outcome "succeeded"/ },
  );
  const { [EXT_CORRELATION_ID]: _, ...uncorrelated } = request;
  t.throws(() => buildCompleted({ request: uncorrelated, outcome: 'succeeded', source: HOOK_SOURCE }), {
    message: /lacks correlationid/,
  });
});
