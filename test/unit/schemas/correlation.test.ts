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
});

test('a correctly signed payload that is not a ref is still refused', (t) => {
  // Signed by hand with the documented algorithm: the shape check must not rest on the MAC alone.
  const sign = (payload: string) =>
    createHmac('sha256', Buffer.from(vectors.keys.primary, 'hex')).update(`prestart.dev/correlationid/v1:${payload}`).digest('base64url');
  const keys = KeyRing.fromHex(vectors.keys.primary);
  for (const json of [
    '{"namespace":"shop"}',
    '[]',
    '"x"',
    'null',
    `{"namespace":"shop","revision":"r","revisionUID":"u","hook":"h","attempt":"1"}`,
  ]) {
    const payload = Buffer.from(json).toString('base64url');
    t.is(keys.verify(`${payload}.${sign(payload)}`), undefined, json);
  }
  const good = Buffer.from(JSON.stringify(ref)).toString('base64url');
  t.deepEqual(keys.verify(`${good}.${sign(good)}`), ref);
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

test('request ids are stable per revision, hook and attempt, with a distinct cancel id', (t) => {
  const uid = ref.revisionUID;
  t.is(requestId(uid, 'db-migrate', 1, 'start'), `${uid}/db-migrate/1`);
  t.is(requestId(uid, 'db-migrate', 1, 'start'), requestId(uid, 'db-migrate', 1, 'start'));
  t.is(requestId(uid, 'db-migrate', 1, 'cancel'), `${uid}/db-migrate/1/cancel`);
  t.not(requestId(uid, 'db-migrate', 2, 'start'), requestId(uid, 'db-migrate', 1, 'start'));
  t.not(requestId(uid, 'cache', 1, 'start'), requestId(uid, 'db-migrate', 1, 'start'));
});
