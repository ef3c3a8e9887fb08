// Shadow mode: an Audit hook is requested and recorded like any other but never holds or fails the
// Revision; what it would have decided shows in the run.
import test from 'ava';
import { HOLD_LABEL } from '../../../../api/types.ts';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, observed, ofType } from './_builders.ts';

const step = (o: Observed, seconds: number) => {
  const now = { ...o, now: at(seconds) };
  const d = decideRevision(now);
  return { d, o: apply(now, d.actions) };
};

test('an Audit hook is requested with its stage, and the Revision is released without waiting for it', (t) => {
  let o = observed(heldRevision(['db', 'new-check']), [hook('db', { order: 1 }), hook('new-check', { order: 1, mode: 'Audit' })]);
  const first = step(o, 1);
  t.deepEqual(
    ofType(first.d, 'createRun')[0]?.requests.map((r) => r.hook.name),
    ['db', 'new-check'],
    'requested like any other, in the status the run is created with',
  );
  o = answer({ ...first.o, now: at(2) }, 'db');
  const released = step(o, 2);
  t.is(ofType(released.d, 'release').length, 1, 'released while the Audit hook still runs');
  t.false(released.o.revision.labels[HOLD_LABEL] === 'true');
  t.like(
    released.o.run?.status?.hooks.find((h) => h.name === 'new-check'),
    { phase: 'Requested' },
  );
});

test('an Audit hook that fails never holds; the run says it would have held', (t) => {
  let o = observed(heldRevision(['db', 'new-check']), [hook('db', { order: 2 }), hook('new-check', { order: 1, mode: 'Audit' })]);
  const first = step(o, 1);
  t.deepEqual(
    ofType(first.d, 'createRun')[0]?.requests.map((r) => r.hook.name),
    ['db', 'new-check'],
    'the lower-order Audit hook does not make the Enforce hook wait',
  );
  o = answer({ ...first.o, now: at(2) }, 'new-check', { outcome: 'failed', message: 'image has 3 critical CVEs' });
  o = step(o, 2).o;
  t.is(o.run?.status?.phase, 'Running', 'still waiting for db only');
  t.is(o.run?.status?.conditions.find((c) => c.type === 'Ready')?.message, 'waiting for db');
  o = answer({ ...o, now: at(3) }, 'db');
  o = step(o, 3).o;
  t.is(o.run?.status?.phase, 'Released');
  t.is(
    o.run?.status?.conditions.find((c) => c.type === 'Ready')?.message,
    '1/2 hooks succeeded; audit only (would have held): hook new-check failed: image has 3 critical CVEs',
  );
});

test('an Audit hook of a higher order than every Enforce hook is still requested', (t) => {
  let o = observed(heldRevision(['db', 'smoke']), [hook('db', { order: 1 }), hook('smoke', { order: 5, mode: 'Audit' })]);
  o = step(o, 1).o;
  o = answer({ ...o, now: at(2) }, 'db');
  const d = step(o, 2).d;
  t.deepEqual(
    ofType(d, 'sendRequest').map((s) => s.hook.name),
    ['smoke'],
  );
  t.is(ofType(d, 'release').length, 1);
});

test('a run of Audit hooks only is created Pending: the next pass requests them as it releases', (t) => {
  let o = observed(heldRevision(['new-check']), [hook('new-check', { mode: 'Audit' })]);
  const created = step(o, 0);
  t.like(ofType(created.d, 'createRun')[0], { status: { phase: 'Pending' }, requests: [] });
  o = created.o;
  const released = step(o, 1).d;
  t.deepEqual(
    ofType(released, 'sendRequest').map((s) => s.hook.name),
    ['new-check'],
  );
  t.is(ofType(released, 'release').length, 1);
});
