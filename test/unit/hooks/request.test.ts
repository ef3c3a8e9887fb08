import { readFileSync } from 'node:fs';
import test from 'ava';
import { attemptKey, toHookRequest } from '../../../hooks/sdk/request.ts';
import { parseRequested } from '../../../schemas/index.ts';
import { cancelEvent, parsed, requestEvent } from '../../support/events.ts';

test('the protocol vector start-binary reads as a typed request', (t) => {
  const vector = JSON.parse(readFileSync(new URL('../../../schemas/vectors/requested/valid/start-binary.json', import.meta.url), 'utf8'));
  const result = parseRequested({ headers: vector.headers, body: vector.body });
  if (!result.ok) return t.fail(result.error.reason);
  const request = toHookRequest(result.request);
  t.is(request.hook, 'db-migrate');
  t.is(request.attempt, 1);
  t.deepEqual(request.params, { database: 'orders', dryRun: false });
  t.is(request.deadline.toISOString(), '2025-06-01T12:10:00.000Z');
  t.deepEqual(request.allowedContributions, ['env', 'volume']);
  t.like(request.revision, { namespace: 'shop', name: 'checkout-00002', service: 'checkout', configuration: 'checkout' });
  t.is(request.revision.uid, '5b7c3a1e-9f0d-4c2b-8e61-0a4d2f3b7c9e');
  t.is(request.event.id, '9d4e2b71-6c3a-4f8e-b5d0-7a1c3e9f2b64/db-migrate/1', '<runUID>/<hook>/<attempt>');
});

test('a handler changing its request does not change what the SDK remembers', (t) => {
  const p = parsed(requestEvent({ params: { nested: { a: 1 } } }));
  const request = toHookRequest(p);
  (request.params.nested as { a: number }).a = 2;
  request.revision.labels.x = 'y';
  t.deepEqual(p.data.hook.params, { nested: { a: 1 } });
  t.is(p.data.revision.labels.x, undefined);
});

test('a cancel names the same attempt as its start, though its id differs', (t) => {
  const start = requestEvent();
  const cancel = cancelEvent(start);
  t.not(cancel.id, start.id);
  t.is(attemptKey(parsed(cancel)), attemptKey(parsed(start)));
  const uid = (start.data as { revision: { uid: string } }).revision.uid;
  t.not(attemptKey(parsed(requestEvent({ attempt: 2, uid }))), attemptKey(parsed(start)));
  t.not(
    attemptKey(parsed(requestEvent({ attempt: 1, uid }))),
    attemptKey(parsed(start)),
    'attempt 1 of a run created again for the same Revision is another request',
  );
});
