// A hook that answers `retry` (ask me again in N seconds): the gate waits without re-sending,
// asks again at that moment as attempt + 1 with the same deadline, counts the retries, bounds
// them by the PrestartHook's spec.retryAfter, and still times the hook out at its deadline.
import test from 'ava';
import { PRESTART_CONDITION, REASON_ANNOTATION } from '../../../../api/types.ts';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import { applyReply } from '../../../../gate/core/reply.ts';
import { snapshotHook } from '../../../../gate/core/snapshot.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, observed, ofType, reply, step, storeStarted } from './_builders.ts';

type HookSpec = Parameters<typeof hook>[1];

/** quota (timeout 60 s, resends every 20 s) asked at 1 s: its deadline is 61 s. */
function requested(spec: HookSpec = {}): Observed {
  const o = observed(heldRevision(['quota']), [hook('quota', spec)], { now: at(1) });
  return storeStarted(apply(o, decideRevision(o).actions));
}

const busy = (seconds: number, message = 'quota busy') => ({ outcome: 'retry' as const, retryAfter: seconds, message });
const quota = (o: Observed) => o.run?.status?.hooks.find((h) => h.name === 'quota');

test('a retry reply ends the attempt: no resend, no timeout before the deadline, a wake-up at the retry moment', (t) => {
  const o = answer({ ...requested(), now: at(5) }, 'quota', busy(40));
  t.like(quota(o), { phase: 'Requested', attempt: 1, retryAt: at(45).toISOString(), retries: 1, retryReason: 'quota busy' });
  // 30 s is past the 20 s resendInterval: a hook that is not working on anything is not asked again early.
  const { decision, next } = step(t, o, at(30));
  t.deepEqual(ofType(decision, 'sendRequest'), []);
  t.is(decision.requeueAfterMs, 15_000, 'wakes at the retry moment (45 s)');
  // The hold reason (Knative's own message shows it), the run's Ready message and the Revision's condition say so.
  const line = 'quota retrying at 00:00:45Z (attempt 2, retry 1 of 10): quota busy';
  t.is(next.revision.annotations[REASON_ANNOTATION], `hook ${line}`);
  t.is(next.run?.status?.conditions.find((c) => c.type === 'Ready')?.message, `waiting for quota; ${line}`);
  const cond = decideRevision({ ...o, now: at(30) }).actions.find((a) => a.type === 'setRevisionCondition');
  t.like(cond?.type === 'setRevisionCondition' ? cond.condition : undefined, {
    type: PRESTART_CONDITION,
    status: 'Unknown',
    reason: 'quota retrying at 00:00:45Z (attempt 2, retry 1): quota busy',
  });
});

test('at the retry moment the gate asks again: attempt 2, written before it is sent, with the same deadline', (t) => {
  let o = answer({ ...requested(), now: at(5) }, 'quota', busy(40));
  o = step(t, o, at(30)).next;
  const { decision, next } = step(t, o, at(45));
  const types = decision.actions.map((a) => a.type);
  t.true(types.indexOf('updateRunStatus') < types.indexOf('sendRequest'), 'record, then send');
  t.like(ofType(decision, 'sendRequest'), [{ attempt: 2, deadline: at(61).toISOString() }]);
  t.like(quota(next), {
    phase: 'Requested',
    attempt: 2,
    requestedAt: at(45).toISOString(),
    deadline: at(61).toISOString(),
    retries: 1,
    retryReason: 'quota busy',
  });
  t.is(quota(next)?.retryAt, undefined);
  t.is(next.revision.annotations[REASON_ANNOTATION], undefined, 'the hold reason is cleared once it is asked again');
  t.is(decision.requeueAfterMs, 16_000, 'the deadline (61 s) is the next thing to look at');
});

test('retries are counted across attempts, kept on record, and a success after them releases', (t) => {
  let o = answer({ ...requested({ timeout: '10m' }), now: at(2) }, 'quota', busy(1));
  o = step(t, o, at(3)).next;
  o = answer({ ...o, now: at(4) }, 'quota', busy(1, 'still busy'));
  t.like(quota(o), { attempt: 2, retries: 2, retryReason: 'still busy' });
  o = step(t, o, at(5)).next;
  o = answer({ ...o, now: at(6) }, 'quota', { outcome: 'succeeded', message: 'granted' });
  t.like(quota(o), { phase: 'Succeeded', attempt: 3, retries: 2, retryReason: 'still busy', message: 'granted' });
  const { decision } = step(t, o, at(6));
  t.is(ofType(decision, 'release').length, 1);
});

test('a late reply of the old attempt is refused once the gate asked again; a repeat of the retry is a duplicate', (t) => {
  let o = answer({ ...requested(), now: at(5) }, 'quota', busy(10));
  const run = o.run;
  if (!run) throw new Error('no run');
  t.deepEqual(applyReply(run, reply(run, 'quota', busy(10)), at(6)), { type: 'duplicate' });
  o = step(t, o, at(15)).next;
  const late = o.run ? applyReply(o.run, reply(o.run, 'quota', { attempt: 1, outcome: 'succeeded' }), at(16)) : undefined;
  t.like(late, { type: 'rejected', reason: 'stale attempt 1 of hook quota (current attempt 2)' });
});

test('the deadline wins: a retry due after it is never sent, and the hook times out at the deadline saying why it waited', (t) => {
  let o = answer({ ...requested(), now: at(50) }, 'quota', busy(30));
  const waiting = step(t, o, at(55));
  t.is(waiting.decision.requeueAfterMs, 6_000, 'the deadline (61 s) comes before the retry (80 s)');
  o = waiting.next;
  const { decision, next } = step(t, o, at(61));
  t.deepEqual(ofType(decision, 'sendRequest'), []);
  t.like(quota(next), {
    phase: 'TimedOut',
    attempt: 1,
    message: `no reply within 1m; it had asked to be asked again at ${at(80).toISOString()}: quota busy`,
  });
  t.is(next.run?.status?.phase, 'Failed');
  t.regex(next.revision.annotations[REASON_ANNOTATION] ?? '', /^hook quota timed out: no reply within 1m; it had asked to be asked again/);
});

test('spec.retryAfter.maxRetries: the retry past it fails the hook, and its failurePolicy decides', (t) => {
  let o = answer({ ...requested({ retryAfter: { maxRetries: 1 } }), now: at(2) }, 'quota', busy(1));
  o = step(t, o, at(3)).next;
  o = answer({ ...o, now: at(4) }, 'quota', busy(1, 'still busy'));
  t.like(quota(o), {
    phase: 'Failed',
    attempt: 2,
    retries: 1,
    message: 'still not ready after 1 retries (spec.retryAfter.maxRetries of PrestartHook quota): still busy',
  });
  const { next } = step(t, o, at(4));
  t.is(next.run?.status?.phase, 'Failed');
  t.regex(
    next.revision.annotations[REASON_ANNOTATION] ?? '',
    /^hook quota failed: still not ready after 1 retries .*; retry: kubectl annotate prestartrun/,
  );

  const ignored = answer({ ...requested({ retryAfter: { maxRetries: 0 }, failurePolicy: 'Ignore' }), now: at(2) }, 'quota', busy(1));
  t.like(quota(ignored), {
    phase: 'Failed',
    message: 'asked to be asked again, but PrestartHook quota allows no retries (spec.retryAfter.maxRetries 0): quota busy',
  });
  t.is(ofType(step(t, ignored, at(2)).decision, 'release').length, 1, 'failurePolicy Ignore releases without it');
});

test('spec.retryAfter.maxDelay cuts a longer delay, and the reason says so; the defaults are 5m and 10', (t) => {
  const o = answer({ ...requested({ timeout: '1h', retryAfter: { maxDelay: '10s' } }), now: at(2) }, 'quota', busy(600));
  t.like(quota(o), { retryAt: at(12).toISOString(), retryReason: 'quota busy (asked for 10m, cut to spec.retryAfter.maxDelay 10s)' });
  const byDefault = answer({ ...requested({ timeout: '1h' }), now: at(2) }, 'quota', busy(3600));
  t.is(quota(byDefault)?.retryAt, at(302).toISOString());
  t.is(snapshotHook(hook('x')).retryAfter, undefined, 'a hook that sets no limits keeps its snapshot as it was');
  t.deepEqual(snapshotHook(hook('x', { retryAfter: { maxDelay: '1m' } })).retryAfter, { maxDelaySeconds: 60, maxRetries: 10 });
  t.throws(() => snapshotHook(hook('x', { retryAfter: { maxDelay: '500ms' } })), { message: /retryAfter.maxDelay must be at least 1s/ });
  t.throws(() => snapshotHook(hook('x', { retryAfter: { maxRetries: -1 } })), { message: /retryAfter.maxRetries must be a whole number/ });
});

test('a hook waiting to be asked again is not silent: its heartbeat does not time it out', (t) => {
  let o = answer({ ...requested({ timeout: '1h', heartbeatTimeout: '1m' }), now: at(5) }, 'quota', busy(300));
  o = step(t, o, at(200)).next;
  t.like(quota(o), { phase: 'Requested', attempt: 1 });
  const { next } = step(t, o, at(305));
  t.like(
    quota(next),
    { phase: 'Requested', attempt: 2, requestedAt: at(305).toISOString() },
    'the heartbeat clock starts again with the new attempt',
  );
});

test('a retry that came due while no leader acted is asked at once, its deadline moved by one resendInterval', (t) => {
  const o = answer({ ...requested(), now: at(5) }, 'quota', busy(10));
  // A new leader from 100 s: the retry (15 s) and the deadline (61 s) both passed in the outage.
  const { decision, next } = step(t, { ...o, leaderSince: at(100) }, at(100));
  t.like(ofType(decision, 'sendRequest'), [{ attempt: 2, deadline: at(120).toISOString() }]);
  t.like(quota(next), { phase: 'Requested', attempt: 2, deadline: at(120).toISOString() });
});

test('a Revision deleted while its hook waits to be asked again: Cancelled, no longer waiting, never asked again', (t) => {
  const o = answer({ ...requested(), now: at(5) }, 'quota', busy(40));
  const deleting = { ...o, revision: { ...o.revision, deleting: true }, now: at(10) };
  const decision = decideRevision(deleting);
  const next = apply(deleting, decision.actions);
  t.like(quota(next), { phase: 'Cancelled', attempt: 1, retries: 1 });
  t.is(quota(next)?.retryAt, undefined);
  t.deepEqual(ofType(decision, 'sendRequest'), []);
  t.deepEqual(ofType(decideRevision({ ...next, now: at(60) }), 'sendRequest'), [], 'the retry moment passes without a request');
});
