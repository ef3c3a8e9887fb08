// Sender identity on the reply path: the pure rules (sinks/identity.ts) and the review cache
// (sinks/token-review.ts) with the apiserver's answer given as a function and a clock of our own.
import test from 'ava';
import type { Reply } from '../../../api/types.ts';
import { toBinary } from '../../../schemas/index.ts';
import {
  bearerToken,
  judge,
  jwtExpiryMs,
  keepUntil,
  MAX_CACHE_MS,
  precheck,
  REFUSAL_CACHE_MS,
  type Review,
} from '../../../sinks/identity.ts';
import { handleCompleted } from '../../../sinks/intake.ts';
import { createReplyIdentity } from '../../../sinks/token-review.ts';
import { completedEvent, recordingOnReply, requestEvent } from '../../support/events.ts';
import { keys } from '../../support/keys.ts';

const SA = { namespace: 'team-a', name: 'migrate' };
const USER = 'system:serviceaccount:team-a:migrate';
const DIRECT = [{ username: USER, road: 'directly' }];
const jwt = (claims: object) => `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.c2ln`;
const reply = (hook = 'db') => ({ hook }) as Reply;

test('the bearer token is read from the header; anything else there is malformed', (t) => {
  t.is(bearerToken(undefined), undefined);
  t.is(bearerToken('Bearer abc.def-_'), 'abc.def-_');
  t.is(bearerToken('bearer  abc'), 'abc');
  t.is(bearerToken('Basic dXNlcg=='), 'malformed');
  t.is(bearerToken('Bearer '), 'malformed');
  t.is(bearerToken(['Bearer a', 'Bearer b']), 'malformed');
});

test('required: no token is 401, a hook without a ServiceAccount is 403 (fail closed); optional takes both', (t) => {
  t.like(precheck('required', 'db', { serviceAccount: SA }, undefined), { ok: false, status: 401 });
  t.like(precheck('required', 'db', undefined, 'tok'), { ok: false, status: 403 });
  t.like(precheck('required', 'db', { serviceAccount: SA }, 'malformed'), { ok: false, status: 401 });
  t.deepEqual(precheck('required', 'db', { serviceAccount: SA }, 'tok'), { check: 'tok', expected: DIRECT });
  t.deepEqual(precheck('optional', 'db', { serviceAccount: SA }, undefined), { ok: true });
  // A hook deleted while a run waits on it: declared mode cannot tell whether it named a sender.
  t.like(precheck('declared', 'db', undefined, undefined, undefined, false), { ok: false, status: 403 });
  t.like(precheck('declared', 'db', undefined, 'tok', undefined, false), { ok: false, status: 403 });
  t.deepEqual(precheck('declared', 'db', undefined, undefined, undefined, true), { ok: true }, 'an existing hook naming no sender');
  t.deepEqual(precheck('optional', 'db', undefined, 'tok'), { ok: true });
  t.like(precheck('optional', 'db', { serviceAccount: SA }, 'malformed'), { ok: false, status: 401 });
  t.deepEqual(precheck('optional', 'db', { serviceAccount: SA }, 'tok'), { check: 'tok', expected: DIRECT });
});

test('declared: a hook that names its sender needs that token, one that names none is taken on its replyid', (t) => {
  const refused = precheck('declared', 'db', { serviceAccount: SA }, undefined);
  t.like(refused, { ok: false, status: 401 });
  t.regex(
    'reason' in refused ? refused.reason : '',
    new RegExp(`needs a bearer token \\(it replies as ${USER} directly\\) \\(the gate runs with --reply-identity declared\\)`),
  );
  t.deepEqual(precheck('declared', 'db', undefined, undefined), { ok: true });
  t.deepEqual(precheck('declared', 'db', undefined, 'tok'), { ok: true });
  t.deepEqual(precheck('declared', 'db', { serviceAccount: SA }, 'tok'), { check: 'tok', expected: DIRECT });
  t.like(precheck('declared', 'db', undefined, 'malformed'), { ok: false, status: 401 });
  const trigger = { namespace: 'shop', name: 'r', serviceAccount: 'oidc-r' };
  t.like(
    precheck('declared', 'db', undefined, undefined, trigger),
    { ok: false, status: 401 },
    "a Broker's reply Trigger with an OIDC identity declares the sender",
  );
  t.deepEqual(
    precheck('declared', 'db', undefined, undefined, { namespace: 'shop', name: 'r' }),
    { ok: true },
    'no OIDC identity yet: nothing declared',
  );
});

test('a review: invalid or for other audiences is 401, another user is 403, the hook’s own is ok', (t) => {
  t.like(judge({ authenticated: false, reason: 'expired' }, 'aud', DIRECT, 'db'), { ok: false, status: 401 });
  t.like(judge({ authenticated: true, username: USER, audiences: ['other'] }, 'aud', DIRECT, 'db'), { ok: false, status: 401 });
  t.like(judge({ authenticated: true, username: 'system:serviceaccount:x:y', audiences: ['aud'] }, 'aud', DIRECT, 'db'), {
    ok: false,
    status: 403,
  });
  t.deepEqual(judge({ authenticated: true, username: USER, audiences: ['aud'] }, 'aud', DIRECT, 'db'), { ok: true });
});

test('Broker road: the reply Trigger’s OIDC ServiceAccount may reply for a Broker hook, its request Trigger and strangers may not', (t) => {
  const replyTrigger = { namespace: 'shop', name: 'prestart-gate-replies-default', serviceAccount: 'replies-oidc' };
  const TRIGGER_USER = 'system:serviceaccount:shop:replies-oidc';
  // No identity.serviceAccount: only what came through the gate's reply Trigger.
  const first = precheck('required', 'db', undefined, 'tok', replyTrigger);
  t.deepEqual(first, {
    check: 'tok',
    expected: [{ username: TRIGGER_USER, road: "through the Broker's reply Trigger shop/prestart-gate-replies-default" }],
  });
  const expected = 'check' in first ? first.expected : [];
  t.deepEqual(judge({ authenticated: true, username: TRIGGER_USER }, 'aud', expected, 'db'), { ok: true });
  const requestTrigger = judge(
    { authenticated: true, username: 'system:serviceaccount:shop:prestart-hook-db-oidc' },
    'aud',
    expected,
    'db',
  );
  t.like(requestTrigger, { ok: false, status: 403 });
  t.regex(
    !requestTrigger.ok ? requestTrigger.reason : '',
    /replies as system:serviceaccount:shop:replies-oidc \(through the Broker's reply Trigger/,
  );
  // Both roads when the hook names its ServiceAccount too.
  const both = precheck('required', 'db', { serviceAccount: SA }, 'tok', replyTrigger);
  t.deepEqual('check' in both ? both.expected.map((s) => s.username) : [], [USER, TRIGGER_USER]);
  // A reply Trigger Eventing has not given an identity yet (OIDC off): nothing to tie the reply to.
  const unset = precheck('required', 'db', undefined, 'tok', { namespace: 'shop', name: 'prestart-gate-replies-default' });
  t.like(unset, { ok: false, status: 403 });
  t.regex(!('check' in unset) && !unset.ok ? unset.reason : '', /no OIDC identity yet .*authentication-oidc/);
  t.deepEqual(precheck('optional', 'db', undefined, 'tok', { namespace: 'shop', name: 'r' }), { ok: true });
});

test('the reply Trigger is looked up only for a reply that carries a token', async (t) => {
  const asked: string[] = [];
  const identity = createReplyIdentity({
    mode: 'required',
    audience: 'aud',
    identityOf: () => undefined,
    replyTriggerOf: async (hook) => {
      asked.push(hook);
      return { namespace: 'shop', name: 'r', serviceAccount: 'r-oidc' };
    },
    review: async () => ({ authenticated: true, username: 'system:serviceaccount:shop:r-oidc' }),
  });
  t.like(await identity.check(reply(), undefined), { ok: false, status: 401 });
  t.like(await identity.check(reply(), 'Basic x'), { ok: false, status: 401 });
  t.deepEqual(asked, []);
  t.deepEqual(await identity.check(reply(), 'Bearer tok'), { ok: true });
  t.deepEqual(asked, ['db']);
});

test('exp is read from the payload only to know how long to keep a review, never past an hour', (t) => {
  t.is(jwtExpiryMs(jwt({ exp: 1000 })), 1_000_000);
  t.is(jwtExpiryMs('opaque'), undefined);
  t.is(jwtExpiryMs(jwt({ exp: 'soon' })), undefined);
  const ok: Review = { authenticated: true, username: USER };
  t.is(keepUntil(ok, jwt({ exp: 2000 }), 1_000_000), 2_000_000);
  t.is(keepUntil(ok, jwt({ exp: 9_999_999 }), 0), MAX_CACHE_MS);
  t.is(keepUntil(ok, 'opaque', 5), 5 + MAX_CACHE_MS);
  t.is(keepUntil({ authenticated: false, reason: 'x' }, jwt({ exp: 9_999_999 }), 5), 5 + REFUSAL_CACHE_MS);
});

function reviewer(answer: (token: string) => Review) {
  const calls: string[] = [];
  return {
    calls,
    review: async (token: string, _audience: string) => {
      calls.push(token);
      return answer(token);
    },
  };
}

test('one review per token until its exp, then again; the cache is capped', async (t) => {
  let now = 0;
  const { calls, review } = reviewer(() => ({ authenticated: true, username: USER }));
  const id = createReplyIdentity({
    mode: 'required',
    audience: 'aud',
    identityOf: () => ({ serviceAccount: SA }),
    review,
    now: () => now,
    maxEntries: 2,
  });
  const a = jwt({ exp: 100 });
  for (let i = 0; i < 5; i++) t.deepEqual(await id.check(reply(), `Bearer ${a}`), { ok: true });
  t.is(calls.length, 1);
  now = 100_000;
  await id.check(reply(), `Bearer ${a}`);
  t.is(calls.length, 2, 'expired: reviewed again');
  now = 0;
  const [b, c] = [jwt({ exp: 50, n: 1 }), jwt({ exp: 50, n: 2 })];
  await id.check(reply(), `Bearer ${b}`);
  await id.check(reply(), `Bearer ${c}`);
  await id.check(reply(), `Bearer ${a}`);
  t.is(calls.length, 5, 'the oldest entry was dropped when a third came in');
  t.is(id.reviews, 5);
});

test('concurrent replies with one new token make one review; the identity is read per reply', async (t) => {
  const { calls, review } = reviewer(() => ({ authenticated: true, username: USER }));
  let sa = SA;
  const id = createReplyIdentity({ mode: 'required', audience: 'aud', identityOf: () => ({ serviceAccount: sa }), review });
  const token = jwt({ exp: Date.now() / 1000 + 600 });
  const verdicts = await Promise.all(Array.from({ length: 10 }, () => id.check(reply(), `Bearer ${token}`)));
  t.true(verdicts.every((v) => v.ok));
  t.is(calls.length, 1);
  sa = { namespace: 'team-a', name: 'someone-else' };
  t.like(await id.check(reply(), `Bearer ${token}`), { ok: false, status: 403 }, 'a changed identity counts at once, cache or not');
  t.is(calls.length, 1);
});

test('the intake: a refused sender never reaches the state; an apiserver failure is transient', async (t) => {
  const { seen, onReply } = recordingOnReply();
  const opts = { keys, maxBytes: 65536, onReply };
  const message = toBinary(completedEvent(requestEvent({ hook: 'db' })));
  const refusing = createReplyIdentity({
    mode: 'required',
    audience: 'aud',
    identityOf: () => ({ serviceAccount: SA }),
    review: async () => ({ authenticated: true, username: 'system:serviceaccount:x:y' }),
  });
  t.like(await handleCompleted(message, opts, { identity: refusing, authorization: undefined }), { outcome: 'invalid', status: 401 });
  t.like(await handleCompleted(message, opts, { identity: refusing, authorization: 'Bearer t' }), { outcome: 'invalid', status: 403 });
  const failing = createReplyIdentity({
    mode: 'required',
    audience: 'aud',
    identityOf: () => ({ serviceAccount: SA }),
    review: async () => {
      throw new Error('apiserver unavailable');
    },
  });
  t.like(await handleCompleted(message, opts, { identity: failing, authorization: 'Bearer t' }), { outcome: 'transient' });
  t.is(seen.length, 0);
  t.like(await handleCompleted(message, opts), { outcome: 'applied' }, 'no sender (sync answers, NATS): as before');
});
