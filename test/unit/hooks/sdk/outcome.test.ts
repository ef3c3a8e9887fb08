import test from 'ava';
import { errorEvent, finalEvent, MAX_MESSAGE, progressEvent } from '../../../../hooks/sdk/outcome.ts';
import { fail, succeed } from '../../../../hooks/sdk/types.ts';
import { checkCompletedData } from '../../../../schemas/index.ts';
import { parsed, requestEvent } from '../../../support/events.ts';

const request = parsed(requestEvent({ hook: 'db' }));
const source = '/prestart-hooks/db';

test('succeed() becomes a succeeded reply echoing the correlationid, hook, attempt and subject', (t) => {
  const event = finalEvent(request, succeed('ready', [{ name: 'db', secretName: 'orders-db', as: 'volume' }]), source);
  t.is(event.type, 'revision.prestart.completed');
  t.is(event.replyid, request.correlationid);
  t.is(event.prestarthook, 'db');
  t.is(event.prestartattempt, 1);
  t.is(event.subject, 'shop/checkout-00002');
  t.deepEqual(event.data, {
    outcome: 'succeeded',
    message: 'ready',
    contributions: [{ name: 'db', secretName: 'orders-db', as: 'volume' }],
  });
});

test('fail() becomes a failed reply with its message', (t) => {
  t.deepEqual(finalEvent(request, fail('migration 42 failed'), source).data, { outcome: 'failed', message: 'migration 42 failed' });
});

test('contributions the schema refuses turn the reply into failed, naming the member', (t) => {
  const event = finalEvent(request, succeed('ready', [{ name: 'Not_A_Label', secretName: 'orders-db', as: 'volume' }]), source);
  const data = event.data as { outcome: string; message: string };
  t.is(data.outcome, 'failed');
  t.regex(data.message, /^the hook returned an invalid outcome: data\/contributions\/0\/name must be a DNS-1123 label/);
});

test('a handler returning something that is not an outcome gets a failed reply saying so', (t) => {
  t.like(finalEvent(request, undefined, source).data, {
    outcome: 'failed',
    message: 'the hook returned nothing instead of {succeeded: true|false, ...}',
  });
  t.like(finalEvent(request, { ok: true }, source).data, { outcome: 'failed' });
});

test('a thrown error becomes a failed reply with the error message', (t) => {
  t.like(errorEvent(request, new Error('connection refused'), source).data, {
    outcome: 'failed',
    message: 'the hook threw: connection refused',
  });
});

test('messages longer than the schema allows are clipped, not refused', (t) => {
  const data = finalEvent(request, fail('x'.repeat(10_000)), source).data;
  t.true(checkCompletedData(data).ok);
  t.is((data as { message: string }).message.length, MAX_MESSAGE);
});

test('progress is rounded and kept within 0..100', (t) => {
  t.like(progressEvent(request, 33.6, 'copying', source).data, { outcome: 'progress', progress: 34, message: 'copying' });
  t.like(progressEvent(request, 250, undefined, source).data, { progress: 100 });
  t.like(progressEvent(request, Number.NaN, undefined, source).data, { progress: 0 });
});

test('every final reply has its own id', (t) => {
  t.not(finalEvent(request, succeed(), source).id, finalEvent(request, succeed(), source).id);
});
