import { readFileSync } from 'node:fs';
import test from 'ava';
import { attemptKey, imagesToRun, toHookRequest } from '../../../../hooks/sdk/request.ts';
import { parseRequested } from '../../../../schemas/index.ts';
import { cancelEvent, parsed, requestEvent } from '../../../support/events.ts';

test('the protocol vector start-binary reads as a typed request', (t) => {
  const vector = JSON.parse(
    readFileSync(new URL('../../../../schemas/vectors/requested/valid/start-binary.json', import.meta.url), 'utf8'),
  );
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
  t.is(request.version, 2);
  t.deepEqual(
    request.revision.containers?.map((c) => c.name),
    ['user-container', 'cache-warmer', 'migrate'],
  );
  t.deepEqual(imagesToRun(request), {
    'user-container': 'registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae',
    'cache-warmer': 'kind.local/shop/cache-warmer:dev',
    migrate: 'registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9',
  });
});

test('a request from a version 1 gate reaches the handler as version 1, without containers', (t) => {
  const vector = JSON.parse(readFileSync(new URL('../../../../schemas/vectors/requested/valid/start-v1.json', import.meta.url), 'utf8'));
  const result = parseRequested({ headers: vector.headers, body: vector.body });
  if (!result.ok) return t.fail(result.error.reason);
  const request = toHookRequest(result.request);
  t.is(request.version, 1);
  t.false('containers' in request.revision);
  t.is(imagesToRun(request), undefined);
});

test('a handler changing its request does not change what the SDK remembers', (t) => {
  const p = parsed(requestEvent({ params: { nested: { a: 1 } } }));
  const request = toHookRequest(p);
  (request.params.nested as { a: number }).a = 2;
  request.revision.labels.x = 'y';
  (request.revision.containers?.[0] as { digest?: string }).digest = 'elsewhere@sha256:0';
  t.deepEqual(p.data.hook.params, { nested: { a: 1 } });
  t.is(p.data.revision.labels.x, undefined);
  t.not(p.data.revision.containers?.[0]?.digest, 'elsewhere@sha256:0');
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
