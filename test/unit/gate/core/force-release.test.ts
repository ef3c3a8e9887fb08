// Break glass: the admin's annotated request releases a held Revision without its hooks, records
// who and why in the run, cancels what was still asked, warns once; later decisions do nothing.
import test from 'ava';
import { HOLD_LABEL, REASON_ANNOTATION } from '../../../../api/types.ts';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import { forceRelease } from '../../../../gate/core/force-release.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, observed, ofType, types } from './_builders.ts';

function failedRun(): Observed {
  let o = observed(heldRevision(['db', 'warm']), [hook('db', { order: 1 }), hook('warm', { order: 2 })]);
  o = apply(o, decideRevision(o).actions);
  o = answer({ ...o, now: at(2) }, 'db', { outcome: 'failed', message: 'quota exceeded' });
  return apply(o, decideRevision(o).actions);
}

const forced = (o: Observed, reason = 'incident 42: the db is fine, the check is broken'): Observed => {
  if (!o.run) throw new Error('no run');
  return { ...o, now: at(10), run: { ...o.run, forceRelease: { reason, by: 'alice' } } };
};

test('a failed run is force-released: hold gone, run Released with who and why, a Warning event', (t) => {
  const o = forced(failedRun());
  t.is(o.revision.annotations[REASON_ANNOTATION] !== undefined, true, 'the failure set a hold reason');
  const d = decideRevision(o);
  t.deepEqual(types(d).slice(0, 4), ['setHoldReason', 'release', 'updateRunStatus', 'event:Warning:ForceReleased']);
  const next = apply(o, d.actions);
  t.false(next.revision.labels[HOLD_LABEL] === 'true');
  t.like(next.run?.status, {
    phase: 'Released',
    releasedAt: at(10).toISOString(),
    forcedRelease: { reason: 'incident 42: the db is fine, the check is broken', by: 'alice', at: at(10).toISOString() },
  });
  t.like(
    next.run?.status?.conditions.find((c) => c.type === 'Ready'),
    { status: 'True', reason: 'ForceReleased' },
  );
  t.like(
    next.run?.status?.hooks.find((h) => h.name === 'warm'),
    { phase: 'Cancelled', message: 'force-released by alice: incident 42: the db is fine, the check is broken' },
  );
  t.is(
    ofType(d, 'recordEvent')[0]?.message,
    'released without its hooks, force-released by alice: incident 42: the db is fine, the check is broken',
  );
  t.deepEqual(
    decideRevision(next).actions.filter((a) => a.type !== 'setRevisionCondition'),
    [],
    'done once',
  );
});

test('a running hook is told its request was cancelled', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decideRevision(o).actions);
  const d = decideRevision(forced(o));
  t.deepEqual(
    ofType(d, 'sendCancel').map((s) => [s.hook.name, s.reason]),
    [['db', 'force-released by alice: incident 42: the db is fine, the check is broken']],
  );
});

test('no request, or a Revision being deleted: nothing', (t) => {
  const o = failedRun();
  t.is(forceRelease(o), undefined);
  const f = forced(o);
  t.is(forceRelease({ ...f, revision: { ...f.revision, deleting: true } }), undefined);
});

test('released but the status not yet written (the shell stops at the release): the next pass writes it, without releasing again', (t) => {
  const o = forced(failedRun());
  const unheld = { ...o, revision: { ...o.revision, labels: {} } };
  t.deepEqual(types(decideRevision(unheld)).slice(0, 2), ['updateRunStatus', 'event:Warning:ForceReleased']);
  t.deepEqual(ofType(decideRevision(unheld), 'release'), []);
});
