// Three holes in the run's state machine: which run a request belongs to (a run deleted and
// created again starts at attempt 1 again), a crash right after an Ignore hook timed out, and a
// gate outage longer than a hook's timeout.
import test from 'ava';
import { HOLD_LABEL } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import { applyReply } from '../../../../gate/core/reply.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import {
  answer,
  apply,
  at,
  heldRevision,
  hook,
  hookPhases,
  observed,
  ofType,
  RUN_UID,
  reply,
  step,
  storeStarted,
  types,
} from './_builders.ts';

/** The run created at T0, its first stage requested (and that status stored). */
function started(hooks: ReturnType<typeof hook>[], overrides: Partial<Observed> = {}): Observed {
  const o = observed(heldRevision(hooks.map((h) => h.name)), hooks, overrides);
  return storeStarted(apply(o, decide(o).actions));
}

test('every request and cancel names the run it belongs to', (t) => {
  // The first request is named by the shell, with the UID the create returns (gate/controller/apply.ts).
  const o = started([hook('db')]);
  const resent = decide({ ...o, now: at(20) });
  t.deepEqual(
    ofType(resent, 'sendRequest').map((s) => s.runUID),
    [RUN_UID],
  );
  const superseded = decide({ ...o, supersededBy: 'hello-00002' });
  t.deepEqual(
    ofType(superseded, 'sendCancel').map((s) => s.runUID),
    [RUN_UID],
  );
});

test('a run deleted and created again asks under its own UID, and a reply captured from the old run does not count', (t) => {
  let o = started([hook('db')]);
  const captured = reply(o.run ?? (undefined as never), 'db', { outcome: 'succeeded' });
  o = answer(o, 'db', { outcome: 'failed', message: 'migration failed' });
  o = step(t, o).next;
  t.is(o.run?.status?.phase, 'Failed');

  // The admin deletes the run; the gate creates a new one, whose attempts start at 1 again.
  const { run: _deleted, ...withoutRun } = o;
  const created = decide({ ...withoutRun, now: at(10) });
  t.deepEqual(types(created), ['createRun', 'setHoldReason'], "the old run's failure is no longer the reason");
  const [create] = ofType(created, 'createRun');
  if (!create) throw new Error('no createRun');
  t.like(create.requests[0], { attempt: 1, deadline: at(70).toISOString() });
  t.like(create.status.hooks[0], { phase: 'Requested', attempt: 1 });
  o = storeStarted(apply({ ...withoutRun, now: at(10) }, created.actions));
  if (!o.run) throw new Error('no run');
  o = { ...o, run: { ...o.run, uid: 'run-uid-2' } };
  t.deepEqual(decide(o).actions, [], 'the new run, as the informer brings it, is not asked again');
  t.like(ofType(decide({ ...o, now: at(30) }), 'sendRequest')[0], { runUID: 'run-uid-2', attempt: 1 }, 'its resends carry its own UID');
  if (!o.run) throw new Error('no run');

  t.is(captured.attempt, 1);
  const replayed = applyReply(o.run, captured, at(11));
  t.like(replayed, { type: 'rejected', permanent: true });
  t.regex((replayed as { reason: string }).reason, /earlier PrestartRun .*uid run-uid-1, now run-uid-2/);
  t.deepEqual(hookPhases(o), { db: 'Requested' }, 'the new run still waits for its own reply');
  t.deepEqual(decide({ ...o, now: at(11) }).actions, [], 'nothing to release');
});

test('a crash right after an Ignore hook timed out, between the release and the status write, still ends Released', (t) => {
  let o = started([hook('db', { failurePolicy: 'Ignore', timeout: '1m', resendInterval: '0s' })]);
  const timedOut = decide({ ...o, now: at(60) });
  t.deepEqual(types(timedOut), ['release', 'updateRunStatus', 'event:Normal:Released'], 'release first, as advanceRun does');
  // The gate dies after the release: the status still says Requested.
  o = apply({ ...o, now: at(60) }, timedOut.actions.slice(0, 1));
  t.is(o.revision.labels[HOLD_LABEL], undefined);
  t.deepEqual(hookPhases(o), { db: 'Requested' });
  t.is(o.run?.status?.phase, 'Running');

  const finish = step(t, { ...o, now: at(75) });
  t.deepEqual(types(finish.decision), ['updateRunStatus', 'event:Normal:Released']);
  t.like(finish.next.run?.status, { phase: 'Released', releasedAt: at(75).toISOString(), summary: '0/1' });
  t.like(finish.next.run?.status?.hooks[0], { phase: 'TimedOut', message: 'no reply within 1m', deadline: at(60).toISOString() });
  t.like(finish.next.run?.status?.conditions[0], {
    status: 'True',
    message: '0/1 hooks succeeded; ignored (failurePolicy Ignore): hook db timed out: no reply within 1m',
  });
});

test('an unheld run whose Requested hook has not reached its deadline is still left alone', (t) => {
  let o = started([hook('db', { failurePolicy: 'Ignore', timeout: '1m' })]);
  o = { ...o, revision: { ...o.revision, labels: {} } };
  t.deepEqual(decide({ ...o, now: at(59) }).actions, []);
});

/**
 * The hook (timeout 60s, resendInterval 20s) was asked at T0; `leaderSince`: when the replica now
 * leading began to. What an earlier term sent is not remembered (Observed.sent).
 */
const outage = (leaderSince: Date): Observed => ({
  ...started([hook('db', { timeout: '60s', resendInterval: '20s' })]),
  leaderSince,
  sent: undefined,
});

test('after an outage longer than the timeout, the hook is asked once more and gets one resendInterval to answer', (t) => {
  let o = outage(at(300));
  const resend = step(t, o, at(301));
  t.deepEqual(types(resend.decision), ['updateRunStatus', 'sendRequest'], 'recorded, then sent');
  t.like(ofType(resend.decision, 'sendRequest')[0], { runUID: RUN_UID, attempt: 1, deadline: at(321).toISOString() });
  t.like(resend.next.run?.status?.hooks[0], { phase: 'Requested', lastSentAt: at(301).toISOString(), deadline: at(321).toISOString() });
  t.is(resend.decision.requeueAfterMs, 20_000);

  // The hook finished during the outage and answers from memory.
  o = answer({ ...resend.next, now: at(302) }, 'db');
  const released = step(t, o);
  t.is(ofType(released.decision, 'release').length, 1);
  t.is(released.next.run?.status?.phase, 'Released');
});

test('after an outage, a hook that stays silent times out at the end of its grace period', (t) => {
  const o = step(t, outage(at(300)), at(301)).next;
  t.deepEqual(decide({ ...o, now: at(320.999) }).actions, []);
  const timedOut = step(t, o, at(321));
  t.like(timedOut.next.run?.status?.hooks[0], { phase: 'TimedOut', deadline: at(321).toISOString() });
  t.is(timedOut.next.run?.status?.phase, 'Failed');
});

test('no grace when the deadline comes well after this leader started, or the request was sent by this leader', (t) => {
  // Leading since 10s: the deadline (60s) is past leaderSince + grace (30s); the ordinary rules apply.
  const o = outage(at(10));
  t.like(ofType(decide({ ...o, now: at(20) }), 'sendRequest')[0], { deadline: at(60).toISOString() });
  t.is(step(t, o, at(60)).next.run?.status?.hooks[0]?.phase, 'TimedOut');
  // Leading since before the request: sent by this leader, it times out at its deadline.
  const mine = outage(at(-1));
  t.is(step(t, mine, at(60)).next.run?.status?.hooks[0]?.phase, 'TimedOut');
});

test('a request recorded before this replica led is sent once more at once: its send may have died with the old leader', (t) => {
  // Asked at 0 (timeout 60s, resendInterval 20s); the replica leading since 5s looks at 6s.
  const before = outage(at(5));
  const inherited = step(t, before, at(6));
  t.deepEqual(types(inherited.decision), ['sendRequest'], 'sent, and not written: the run already records the request');
  t.like(ofType(inherited.decision, 'sendRequest')[0], { runUID: RUN_UID, attempt: 1, deadline: at(60).toISOString() });
  t.is(inherited.next.run?.status, before.run?.status);
  // Once: the next look finds it sent by this leader and waits for the resendInterval.
  t.deepEqual(decide({ ...inherited.next, now: at(7) }).actions, []);
  t.is(ofType(decide({ ...inherited.next, now: at(26) }), 'sendRequest').length, 1);
});

test('with resends off the deadline moves by 30s but nothing is sent; the grace is never longer than the timeout', (t) => {
  const quiet = { ...started([hook('db', { timeout: '60s', resendInterval: '0s' })]), leaderSince: at(300) };
  const moved = step(t, quiet, at(301));
  t.deepEqual(types(moved.decision), ['updateRunStatus']);
  t.like(moved.next.run?.status?.hooks[0], { phase: 'Requested', deadline: at(331).toISOString(), lastSentAt: at(0).toISOString() });
  t.is(step(t, moved.next, at(331)).next.run?.status?.hooks[0]?.phase, 'TimedOut');

  const short = { ...started([hook('db', { timeout: '10s', resendInterval: '30s' })]), leaderSince: at(300) };
  const resent = step(t, short, at(301));
  t.like(ofType(resent.decision, 'sendRequest')[0], { deadline: at(311).toISOString() });
});
