import test from 'ava';
import { CANCEL_FINALIZER, REASON_ANNOTATION } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, hookPhases, observed, ofType, revision, types } from './_builders.ts';

/** db (order 1) Requested, warm (order 2) Pending: the run as created. */
function inFlight(): Observed {
  const o = observed(heldRevision(['db', 'warm']), [hook('db', { order: 1 }), hook('warm', { order: 2 })]);
  return apply(o, decide(o).actions);
}

const deleting = (o: Observed): Observed => ({ ...o, now: at(5), revision: { ...o.revision, deleting: true } });

test('deleting a held Revision cancels its requested hooks, then lets it go', (t) => {
  const o = deleting(inFlight());
  const d = decide(o);
  t.deepEqual(types(d), ['updateRunStatus', 'removeFinalizer', 'sendCancel', 'event:Normal:Cancelled']);
  t.like(ofType(d, 'sendCancel')[0], { attempt: 1, reason: 'revision deleted' });
  t.is(ofType(d, 'sendCancel')[0]?.hook.name, 'db');
  const next = apply(o, d.actions);
  t.deepEqual(hookPhases(next), { db: 'Cancelled', warm: 'Cancelled' });
  t.is(next.run?.status?.phase, 'Cancelled');
  t.like(
    next.run?.status?.conditions.find((c) => c.type === 'Ready'),
    {
      status: 'False',
      reason: 'Cancelled',
      message: 'cancelled: revision deleted',
    },
  );
  t.false(next.revision.finalizers.includes(CANCEL_FINALIZER));
  t.deepEqual(decide(next).actions, []);
});

test('deleting only removes the finalizer when there is nothing to cancel', (t) => {
  const noRun = deleting(observed(heldRevision(['db']), [hook('db')]));
  t.deepEqual(decide(noRun).actions, [{ type: 'removeFinalizer' }]);
  t.deepEqual(decide(deleting(observed(revision(), []))).actions, []);
});

test('deleting a released Revision does not touch its run', (t) => {
  let o = inFlight();
  o = answer(o, 'db');
  o = apply(o, decide(o).actions);
  o = answer(o, 'warm');
  o = apply(o, decide(o).actions);
  t.is(o.run?.status?.phase, 'Released');
  t.deepEqual(decide(deleting(o)).actions, []);
});

test('a superseded Revision has its hooks cancelled and stays held with a reason', (t) => {
  const o = { ...inFlight(), supersededBy: 'hello-00002', now: at(5) };
  const d = decide(o);
  t.deepEqual(types(d), ['updateRunStatus', 'sendCancel', 'setHoldReason', 'event:Normal:Cancelled']);
  t.like(ofType(d, 'sendCancel')[0], { reason: 'superseded by hello-00002' });
  const next = apply(o, d.actions);
  t.is(next.run?.status?.phase, 'Cancelled');
  t.is(next.revision.annotations[REASON_ANNOTATION], 'prestart hooks cancelled: superseded by hello-00002');
  t.true(next.revision.finalizers.includes(CANCEL_FINALIZER), 'the finalizer goes when the Revision is deleted');
  t.deepEqual(decide(next).actions, []);
  t.deepEqual(decide({ ...next, supersededBy: undefined }).actions, [], 'a cancelled run is final');
  t.deepEqual(decide(deleting(next)).actions, [{ type: 'removeFinalizer' }]);
});

test('a superseded Revision that traffic names explicitly keeps going', (t) => {
  const o = { ...inFlight(), supersededBy: 'hello-00002', namedByTraffic: true, now: at(20) };
  const d = decide(o);
  t.deepEqual(ofType(d, 'sendCancel'), []);
  t.deepEqual(types(d), ['updateRunStatus', 'sendRequest'], 'it is re-sent as usual');
});

test('a superseded Revision is cancelled before any request goes out', (t) => {
  let o: Observed = { ...observed(heldRevision(['db']), [hook('db')]), supersededBy: 'hello-00002' };
  const created = decide(o);
  t.like(ofType(created, 'createRun')[0], { status: { phase: 'Pending' }, requests: [] }, 'not asked at creation');
  o = apply(o, created.actions);
  const d = decide(o);
  t.deepEqual(ofType(d, 'sendRequest'), []);
  t.deepEqual(ofType(d, 'sendCancel'), [], 'a Pending hook was never asked, so it is not told to stop');
  t.is(apply(o, d.actions).run?.status?.phase, 'Cancelled');
});

test('a superseded Revision whose hooks failed is cancelled too', (t) => {
  let o = inFlight();
  o = answer(o, 'db', { outcome: 'failed', message: 'boom' });
  o = apply(o, decide(o).actions);
  t.is(o.run?.status?.phase, 'Failed');
  const d = decide({ ...o, supersededBy: 'hello-00002' });
  t.deepEqual(ofType(d, 'sendCancel'), [], 'nothing was waiting for an answer');
  const next = apply(o, d.actions);
  t.is(next.run?.status?.phase, 'Cancelled');
  t.deepEqual(hookPhases(next), { db: 'Failed', warm: 'Cancelled' });
  t.is(next.revision.annotations[REASON_ANNOTATION], 'prestart hooks cancelled: superseded by hello-00002');
});

test('deleting a Revision whose release was interrupted finishes the release instead of cancelling', (t) => {
  let o = inFlight();
  o = answer(o, 'db');
  o = apply(o, decide(o).actions);
  o = answer(o, 'warm');
  o = apply(
    o,
    decide(o).actions.filter((a) => a.type === 'release'),
  );
  const withFinalizer = deleting({ ...o, revision: { ...o.revision, finalizers: [CANCEL_FINALIZER] } });
  const d = decide(withFinalizer);
  t.deepEqual(types(d), ['updateRunStatus', 'removeFinalizer', 'event:Normal:Released']);
  t.is(apply(withFinalizer, d.actions).run?.status?.phase, 'Released');
});
