import test from 'ava';
import { REASON_ANNOTATION, RETRY_ANNOTATION } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import { runStatusOf } from '../../../../gate/core/first-stage.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, hookPhases, observed, ofType, step, storeStarted, types } from './_builders.ts';

/** A held Revision for these hooks, its run not created yet. */
function held(hooks: ReturnType<typeof hook>[]): Observed {
  return observed(heldRevision(hooks.map((h) => h.name)), hooks);
}

/** A held Revision whose run was created at T0, with its first stage requested (and that status stored). */
function started(hooks: ReturnType<typeof hook>[]): Observed {
  const o = held(hooks);
  return storeStarted(apply(o, decide(o).actions));
}

const ready = (o: Observed) => (o.run && runStatusOf(o.run))?.conditions.find((c) => c.type === 'Ready');

test('hooks of one order are requested together; the next order only after all of them succeeded', (t) => {
  const first = step(t, held([hook('db', { order: 1 }), hook('cache', { order: 1 }), hook('warm', { order: 2 })]));
  t.deepEqual(types(first.decision), ['createRun'], 'record, then send: the shell sends once the created status is stored');
  t.deepEqual(
    ofType(first.decision, 'createRun')[0]?.requests.map((r) => [r.hook.name, r.attempt]),
    [
      ['db', 1],
      ['cache', 1],
    ],
  );
  let o = first.next;
  t.deepEqual(hookPhases(o), { db: 'Requested', cache: 'Requested', warm: 'Pending' });
  t.like((o.run && runStatusOf(o.run))?.hooks[0], {
    requestedAt: o.now.toISOString(),
    lastSentAt: o.now.toISOString(),
    deadline: at(60).toISOString(),
  });

  o = answer({ ...o, now: at(2) }, 'db');
  const half = step(t, o);
  t.deepEqual(ofType(half.decision, 'sendRequest'), [], 'warm waits for cache');
  o = half.next;
  t.is(o.run?.status?.summary, '1/3');

  o = answer({ ...o, now: at(3) }, 'cache');
  const second = step(t, o);
  t.deepEqual(
    ofType(second.decision, 'sendRequest').map((s) => s.hook.name),
    ['warm'],
  );
  t.is(ofType(second.decision, 'sendRequest')[0]?.deadline, at(63).toISOString());
  o = second.next;
  t.deepEqual(hookPhases(o), { db: 'Succeeded', cache: 'Succeeded', warm: 'Requested' });
});

test('a failure under Fail holds the Revision with a retry command, warns once, and stops later orders', (t) => {
  let o = started([hook('db', { order: 1 }), hook('warm', { order: 2 })]);
  o = answer({ ...o, now: at(4) }, 'db', { outcome: 'failed', message: 'quota exceeded' });

  const failed = step(t, o);
  t.deepEqual(types(failed.decision), ['updateRunStatus', 'setHoldReason', 'event:Warning:HookFailed']);
  o = failed.next;
  t.is(o.run?.status?.phase, 'Failed');
  t.like(ready(o), { status: 'False', reason: 'HookFailed', message: 'hook db failed: quota exceeded' });
  t.is(
    o.revision.annotations[REASON_ANNOTATION],
    `hook db failed: quota exceeded; retry: kubectl annotate prestartrun hello-00001 -n team-a ${RETRY_ANNOTATION}=2 --overwrite`,
  );
  t.deepEqual(hookPhases(o), { db: 'Failed', warm: 'Pending' });

  t.deepEqual(decide({ ...o, now: at(600) }).actions, [], 'no repeated Warning, no request for warm');
});

test('a failure under Ignore lets later orders run and the Revision go', (t) => {
  let o = started([hook('db', { order: 1, failurePolicy: 'Ignore' }), hook('warm', { order: 2 })]);
  o = answer(o, 'db', { outcome: 'failed', message: 'cache cold' });
  const next = step(t, o);
  t.deepEqual(
    ofType(next.decision, 'sendRequest').map((s) => s.hook.name),
    ['warm'],
  );
  t.deepEqual(ofType(next.decision, 'recordEvent'), [], 'an ignored failure is no Warning');
  o = answer(next.next, 'warm');
  const released = step(t, o);
  t.is(ofType(released.decision, 'release').length, 1);
  t.like(ready(released.next), {
    status: 'True',
    message: '1/2 hooks succeeded; ignored (failurePolicy Ignore): hook db failed: cache cold',
  });
});

test('an unanswered request times out at its deadline', (t) => {
  let o = started([hook('db', { timeout: '1m', resendInterval: '0s' })]);
  t.deepEqual(decide({ ...o, now: at(59.999) }).actions, []);

  const timedOut = step(t, o, at(60));
  o = timedOut.next;
  t.deepEqual(types(timedOut.decision), ['updateRunStatus', 'setHoldReason', 'event:Warning:HookTimedOut']);
  t.like(o.run?.status?.hooks[0], { phase: 'TimedOut', message: 'no reply within 1m' });
  t.like(ready(o), { reason: 'HookTimedOut', message: 'hook db timed out: no reply within 1m' });
});

test('a re-send keeps the attempt and the deadline and writes nothing: the leader remembers when it sent', (t) => {
  const first = step(t, held([hook('db', { timeout: '60s', resendInterval: '20s' })]));
  let o = storeStarted(first.next);
  const stored = o.run?.status;
  t.is(decide(o).requeueAfterMs, 20_000, 'wake up for the re-send');
  t.deepEqual(decide({ ...o, now: at(19) }).actions, []);
  t.is(decide({ ...o, now: at(19) }).requeueAfterMs, 1000);

  const resend = step(t, o, at(20));
  t.deepEqual(types(resend.decision), ['sendRequest'], 'a resend is not recorded: the request it repeats was');
  t.like(ofType(resend.decision, 'sendRequest')[0], { attempt: 1, deadline: at(60).toISOString() });
  o = resend.next;
  t.is(o.run?.status, stored, 'the run is as it was');
  t.is(o.sent?.get('db#1'), at(20).getTime());

  t.deepEqual(decide({ ...o, now: at(39) }).actions, [], 'the next resend counts from the remembered one');
  t.is(decide({ ...o, now: at(30) }).requeueAfterMs, 10_000);
  t.is(ofType(decide({ ...o, now: at(40) }), 'sendRequest').length, 1);
  t.is(decide({ ...{ ...o, now: at(40) }, sent: new Map([['db#1', at(40).getTime()]]) }).requeueAfterMs, 20_000);
  t.is(
    decide({ ...o, now: at(45), sent: new Map([['db#1', at(40).getTime()]]) }).requeueAfterMs,
    15_000,
    'the deadline is nearer than the next re-send',
  );
});

test('a new leader asks every Requested hook once at the start of its term, and writes nothing for it', (t) => {
  const first = step(t, held([hook('db', { timeout: '600s', resendInterval: '20s' })]));
  const o = { ...storeStarted(first.next), sent: undefined, leaderSince: at(5) };
  const resend = step(t, { ...o, now: at(6) });
  t.deepEqual(types(resend.decision), ['sendRequest']);
  t.is(resend.next.run?.status, o.run?.status);
  t.deepEqual(decide({ ...resend.next, now: at(25) }).actions, [], 'then every resendInterval from that send');
  t.is(ofType(decide({ ...resend.next, now: at(26) }), 'sendRequest').length, 1);
});

test('an admin retry re-runs failed and timed-out hooks with the next attempt', (t) => {
  let o = started([hook('db', { order: 1 }), hook('cache', { order: 1, timeout: '10s' }), hook('warm', { order: 2 })]);
  o = answer({ ...o, now: at(1) }, 'db', { outcome: 'failed', message: 'boom' });
  o = step(t, o, at(10)).next; // cache times out too
  t.deepEqual(hookPhases(o), { db: 'Failed', cache: 'TimedOut', warm: 'Pending' });
  t.like(ready(o), { status: 'False', message: 'hook db failed: boom; hook cache timed out: no reply within 10s' });
  t.regex(o.revision.annotations[REASON_ANNOTATION] ?? '', /prestart\.dev\/retry=2 --overwrite$/);

  o = { ...o, run: o.run ? { ...o.run, retryToken: '2' } : undefined };
  const retry = step(t, o, at(100));
  t.deepEqual(types(retry.decision), ['updateRunStatus', 'sendRequest', 'sendRequest', 'setHoldReason', 'event:Normal:Retrying']);
  t.deepEqual(ofType(retry.decision, 'setHoldReason'), [{ type: 'setHoldReason', reason: undefined }]);
  t.deepEqual(
    ofType(retry.decision, 'sendRequest').map((s) => [s.hook.name, s.attempt]),
    [
      ['db', 2],
      ['cache', 2],
    ],
  );
  o = retry.next;
  t.is(o.run?.status?.phase, 'Running');
  t.is(o.run?.status?.observedRetry, '2');
  t.like(o.run?.status?.hooks[0], { phase: 'Requested', attempt: 2, requestedAt: at(100).toISOString() });
  t.is(o.run?.status?.hooks[0]?.message, undefined, 'the old failure message is cleared');
  t.like(ready(o), { status: 'Unknown' });

  // Fails again: the Warning comes back, because Ready went False again.
  o = answer({ ...o, now: at(101) }, 'db', { outcome: 'failed', message: 'boom' });
  const again = step(t, o);
  t.is(ofType(again.decision, 'recordEvent')[0]?.reason, 'HookFailed');
  t.regex(again.next.revision.annotations[REASON_ANNOTATION] ?? '', /retry=3 --overwrite$/);
});

test('the same retry token is acted on only once', (t) => {
  let o = started([hook('db')]);
  o = answer(o, 'db', { outcome: 'failed', message: 'boom' });
  o = step(t, o).next;
  o = { ...o, run: o.run ? { ...o.run, retryToken: 'again' } : undefined };
  o = step(t, o, at(10)).next;
  o = answer(o, 'db', { outcome: 'failed', message: 'boom' });
  const failedAgain = step(t, o, at(11));
  t.is(failedAgain.next.run?.status?.hooks[0]?.attempt, 2, 'the unchanged token did not start attempt 3');
  t.is(failedAgain.next.run?.status?.phase, 'Failed');
});

test('a second failure in the same stage warns again, with both hooks named', (t) => {
  let o = started([hook('db', { order: 1 }), hook('cache', { order: 1 })]);
  o = answer(o, 'db', { outcome: 'failed', message: 'one' });
  o = step(t, o).next;
  o = answer({ ...o, now: at(2) }, 'cache', { outcome: 'failed', message: 'two' });
  const second = step(t, o);
  t.deepEqual(
    ofType(second.decision, 'recordEvent').map((e) => [e.eventType, e.reason]),
    [['Warning', 'HookFailed']],
  );
  t.like(ready(second.next), { message: 'hook db failed: one; hook cache failed: two' });
});

test('Ready keeps its lastTransitionTime while its status stays the same', (t) => {
  let o = started([hook('db', { order: 1 }), hook('warm', { order: 2 })]);
  const since = ready(o)?.lastTransitionTime;
  o = answer({ ...o, now: at(30) }, 'db');
  o = step(t, o).next;
  t.like(ready(o), { status: 'Unknown', message: 'waiting for warm', lastTransitionTime: since });
  o = answer({ ...o, now: at(40) }, 'warm');
  o = step(t, o).next;
  t.like(ready(o), { status: 'True', lastTransitionTime: at(40).toISOString() });
});
