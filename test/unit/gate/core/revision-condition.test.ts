// The gate's condition on the Revision (kn's view of the hold): it follows the run through every
// phase, always at severity Info (Knative folds Error-severity conditions into Ready), and a
// second decision on the applied state writes nothing more.
import test, { type ExecutionContext } from 'ava';
import { HOLD_LABEL, PRESTART_CONDITION } from '../../../../api/types.ts';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, observed, ofType } from './_builders.ts';

const NS = 'team-a';
const REV = 'hello-00001';
const prestart = (o: Observed) => o.revision.conditions?.find((c) => c.type === PRESTART_CONDITION);

function step(t: ExecutionContext, o: Observed, now?: Date): Observed {
  const current = now ? { ...o, now } : o;
  const next = apply(current, decideRevision(current).actions);
  // The condition is written once per change (a run is created with its first stage requested).
  t.deepEqual(ofType(decideRevision(next), 'setRevisionCondition'), []);
  return next;
}

test('while held it names the hook, its phase, progress, deadline and last message; after a failure the retry command', (t) => {
  let o = observed(heldRevision(['db', 'cache']), [hook('db', { order: 1 }), hook('cache', { order: 2 })], { now: at(1) });
  o = step(t, o);
  t.like(prestart(o), {
    status: 'Unknown',
    reason: 'db Requested, deadline 00:01:01Z',
    severity: 'Info',
    lastTransitionTime: at(1).toISOString(),
  });
  t.regex(
    prestart(o)?.message ?? '',
    /db Requested, attempt 1, deadline 2025-01-01T00:01:01.000Z; cache Pending, attempt 1; details: kn prestart get hello-00001 -n team-a/,
  );

  o = answer({ ...o, now: at(5) }, 'db', { outcome: 'progress', progress: 40, message: 'migrating table 3/7' });
  o = step(t, o);
  t.is(prestart(o)?.reason, 'db Requested 40%, deadline 00:01:01Z: migrating table 3/7');
  t.is(prestart(o)?.lastTransitionTime, at(1).toISOString(), 'Unknown to Unknown: the transition time stays');

  o = answer({ ...o, now: at(9) }, 'db', { outcome: 'failed', message: 'quota exceeded' });
  o = step(t, o);
  const failed = prestart(o);
  t.like(failed, { status: 'False', severity: 'Info', lastTransitionTime: at(9).toISOString() });
  t.is(failed?.reason, `hook db failed: quota exceeded; retry: kn prestart retry ${REV} -n ${NS}`);
  t.regex(failed?.message ?? '', /kubectl annotate prestartrun hello-00001 -n team-a prestart.dev\/retry=<new value> --overwrite/);
});

test('released: True, and kept in its final state once the hold label is gone', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = step(t, o, at(1));
  o = step(t, answer({ ...o, now: at(2) }, 'db'));
  t.false(o.revision.labels[HOLD_LABEL] === 'true');
  t.like(prestart(o), { status: 'True', reason: 'Released', message: '1/1 hooks succeeded', severity: 'Info' });
});

test('an unheld Revision that never showed the condition and a Revision being deleted are left alone', (t) => {
  const unheld = observed(heldRevision(['db'], { labels: {} }), [hook('db')]);
  t.deepEqual(ofType(decideRevision(unheld), 'setRevisionCondition'), []);
  let o = step(t, observed(heldRevision(['db']), [hook('db')]));
  o = { ...o, revision: { ...o.revision, deleting: true, conditions: [] } };
  t.deepEqual(ofType(decideRevision(o), 'setRevisionCondition'), []);
});

test('the condition is written after every other action, and Knative’s own conditions stay untouched', (t) => {
  const knative = { type: 'Ready', status: 'Unknown' as const, reason: 'Deploying', lastTransitionTime: 'x' };
  const o = observed(heldRevision(['db'], { conditions: [knative] }), [hook('db')]);
  const d = decideRevision(o);
  t.is(d.actions.at(-1)?.type, 'setRevisionCondition');
  t.deepEqual(apply(o, d.actions).revision.conditions?.[0], knative);
});
