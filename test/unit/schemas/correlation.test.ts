import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import test from 'ava';
import type { CorrelationRef } from '../../../schemas/index.ts';
import { KeyRing, MAX_CORRELATION_ID_LENGTH, requestId } from '../../../schemas/index.ts';

const vectors = JSON.parse(readFileSync(new URL('../../../schemas/vectors/correlation.json', import.meta.url), 'utf8')) as {
  keys: { primary: string; previous: string; foreign: string };
  ref: CorrelationRef;
  primary: string;
  previous: string;
  foreign: string;
};

const ref: CorrelationRef = {
  namespace: 'shop',
  revision: 'checkout-00002',
  revisionUID: '5b7c3a1e-9f0d-4c2b-8e61-0a4d2f3b7c9e',
  runUID: '9d4e2b71-6c3a-4f8e-b5d0-7a1c3e9f2b64',
  hook: 'db-migrate',
  attempt: 3,
};

test('a minted id verifies back to the same ref', (t) => {
  const keys = new KeyRing([KeyRing.generateKey()]);
  const id = keys.mint(ref);
  t.deepEqual(keys.verify(id), ref);
  t.regex(id, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
});

test('minting is deterministic, so a resent request carries the same correlationid', (t) => {
  const keys = KeyRing.fromHex(vectors.keys.primary);
  t.is(keys.mint(ref), keys.mint({ ...ref }));
});

test('ids match the documented algorithm in the vectors', (t) => {
  const keys = KeyRing.fromHex(vectors.keys.primary, vectors.keys.previous);
  t.is(keys.mint(vectors.ref), vectors.primary);
  t.deepEqual(keys.verify(vectors.primary), vectors.ref);
  t.deepEqual(keys.verify(vectors.previous), vectors.ref);
  t.is(keys.verify(vectors.foreign), undefined);
});

test('an id minted with another key does not verify (forgery)', (t) => {
  const gate = new KeyRing([KeyRing.generateKey()]);
  const attacker = new KeyRing([KeyRing.generateKey()]);
  t.is(gate.verify(attacker.mint(ref)), undefined);
});

test('rotation: the new key signs, ids from the old key still verify until it is dropped', (t) => {
  const oldKey = KeyRing.generateKey();
  const newKey = KeyRing.generateKey();
  const before = new KeyRing([oldKey]);
  const during = new KeyRing([newKey, oldKey]);
  const after = new KeyRing([newKey]);
  const oldId = before.mint(ref);
  const newId = during.mint(ref);

  t.deepEqual(during.verify(oldId), ref);
  t.deepEqual(during.verify(newId), ref);
  t.deepEqual(after.verify(newId), ref);
  t.is(before.verify(newId), undefined);
  t.is(after.verify(oldId), undefined);
});

test('changing the payload breaks the signature (tampering)', (t) => {
  const keys = new KeyRing([KeyRing.generateKey()]);
  const [, signature] = keys.mint(ref).split('.');
  for (const changed of [
    { ...ref, attempt: 4 },
    { ...ref, hook: 'other' },
    { ...ref, revision: 'checkout-00003' },
    { ...ref, runUID: 'a-run-created-later' },
  ]) {
    const payload = Buffer.from(JSON.stringify(changed)).toString('base64url');
    t.is(keys.verify(`${payload}.${signature}`), undefined);
  }
});

test('changing the signature is refused', (t) => {
  const keys = new KeyRing([KeyRing.generateKey()]);
  const id = keys.mint(ref);
  const last = id.at(-1) === 'A' ? 'B' : 'A';
  t.is(keys.verify(id.slice(0, -1) + last), undefined);
  t.is(keys.verify(id.slice(0, -1)), undefined);
  t.is(keys.verify(`${id}A`), undefined);
});

test('garbage is refused without throwing', (t) => {
  const keys = new KeyRing([KeyRing.generateKey()]);
  const id = keys.mint(ref);
  const garbage: unknown[] = [
    undefined,
    null,
    42,
    {},
    [],
    '',
    '.',
    'abc',
    'abc.',
    '.abc',
    'a.b.c',
    `${id}.${id}`,
    id.replace('.', '!'),
    'x'.repeat(MAX_CORRELATION_ID_LENGTH + 1),
    `${'A'.repeat(MAX_CORRELATION_ID_LENGTH)}.${id.split('.')[1]}`,
    `${Buffer.from('not json').toString('base64url')}.${id.split('.')[1]}`,
    'ü.ü',
  ];
  for (const value of garbage) t.is(keys.verify(value), undefined, `accepted ${String(value).slice(0, 40)}`);
});

test('mint refuses a ref that is not one', (t) => {
  const keys = new KeyRing([KeyRing.generateKey()]);
  t.throws(() => keys.mint({ ...ref, attempt: 0 }), { message: /attempt/ });
  t.throws(() => keys.mint({ ...ref, attempt: 1.5 }), { message: /attempt/ });
  t.throws(() => keys.mint({ ...ref, hook: '' }), { message: /hook/ });
  t.throws(() => keys.mint({ ...ref, runUID: '' }), { message: /runUID/ });
});

test('a correctly signed payload that is not a ref is still refused', (t) => {
  // Signed by hand with the documented algorithm: the shape check must not rest on the MAC alone.
  const sign = (payload: string, version = 'v2') =>
    createHmac('sha256', Buffer.from(vectors.keys.primary, 'hex'))
      .update(`prestart.dev/correlationid/${version}:${payload}`)
      .digest('base64url');
  const keys = KeyRing.fromHex(vectors.keys.primary);
  for (const json of [
    '{"namespace":"shop"}',
    '[]',
    '"x"',
    'null',
    `{"namespace":"shop","revision":"r","revisionUID":"u","runUID":"x","hook":"h","attempt":"1"}`,
    // A v1 ref names no run: it could belong to any run of the Revision.
    `{"namespace":"shop","revision":"r","revisionUID":"u","hook":"h","attempt":1}`,
  ]) {
    const payload = Buffer.from(json).toString('base64url');
    t.is(keys.verify(`${payload}.${sign(payload)}`), undefined, json);
  }
  const good = Buffer.from(JSON.stringify(ref)).toString('base64url');
  t.deepEqual(keys.verify(`${good}.${sign(good)}`), ref);
  t.is(keys.verify(`${good}.${sign(good, 'v1')}`), undefined, 'a MAC made under the v1 context does not verify');
});

test('short or missing keys are refused', (t) => {
  t.throws(() => new KeyRing([]), { message: /at least one key/ });
  t.throws(() => new KeyRing([new Uint8Array(16)]), { message: /at least 32/ });
  t.throws(() => KeyRing.fromHex('zz'.repeat(32)), { message: /not hex/ });
  t.is(KeyRing.fromHex('00'.repeat(32), '11'.repeat(32)).size, 2);
});

test("the key is copied, so changing the caller's buffer later does not change the ring", (t) => {
  const key = KeyRing.generateKey();
  const keys = new KeyRing([key]);
  const id = keys.mint(ref);
  key.fill(0);
  t.deepEqual(keys.verify(id), ref);
});

test('request ids are stable per run, hook and attempt, with a distinct cancel id', (t) => {
  const run = ref.runUID ?? 'run-uid';
  t.is(requestId(run, 'db-migrate', 1, 'start'), `${run}/db-migrate/1`);
  t.is(requestId(run, 'db-migrate', 1, 'start'), requestId(run, 'db-migrate', 1, 'start'));
  t.is(requestId(run, 'db-migrate', 1, 'cancel'), `${run}/db-migrate/1/cancel`);
  t.not(requestId(run, 'db-migrate', 2, 'start'), requestId(run, 'db-migrate', 1, 'start'));
  t.not(requestId(run, 'cache', 1, 'start'), requestId(run, 'db-migrate', 1, 'start'));
  // A run created again for the same Revision starts at attempt 1 again: only the run tells the ids apart.
  t.not(requestId('another-run', 'db-migrate', 1, 'start'), requestId(run, 'db-migrate', 1, 'start'));
});

test('replace() swaps the keys in place: the same ring signs with the new key and verifies both while the old one stays', (t) => {
  const oldKey = KeyRing.generateKey();
  const newKey = KeyRing.generateKey();
  const ring = new KeyRing([oldKey]);
  const oldId = ring.mint(ref);
  ring.replace([newKey, oldKey]);
  const newId = ring.mint(ref);
  t.not(newId, oldId);
  t.deepEqual(new KeyRing([newKey]).verify(newId), ref, 'signed with the new first key');
  t.deepEqual(ring.verify(oldId), ref);
  ring.replace([newKey]);
  t.is(ring.verify(oldId), undefined, 'dropped keys no longer verify');
  t.throws(() => ring.replace([]), { message: /at least one key/ });
  t.throws(() => ring.replace([new Uint8Array(8)]), { message: /at least 32/ });
  t.deepEqual(ring.verify(newId), ref, 'a refused replacement leaves the ring as it was');
});

test('a v1 id (no run UID, an earlier release) verifies as v1 only: it never passes for a v2 id, nor a v2 id for v1', (t) => {
  const keys = KeyRing.fromHex('42'.repeat(32));
  const { runUID: _run, ...v1ref } = ref;
  const v1 = keys.mint(v1ref);
  t.deepEqual(keys.verify(v1), v1ref);
  t.is(keys.verify(v1)?.runUID, undefined);
  // Graft a v2 payload (naming a run) onto the v1 MAC, and the other way round: both refused.
  const v2 = keys.mint(ref);
  const [v1payload, v1mac] = v1.split('.');
  const [v2payload, v2mac] = v2.split('.');
  t.is(keys.verify(`${v2payload}.${v1mac}`), undefined);
  t.is(keys.verify(`${v1payload}.${v2mac}`), undefined);
});
