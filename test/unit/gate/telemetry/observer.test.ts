// The leader's observer, driven by the real core: each reconcile's observation and decision in,
// the transitions out, once each, with durations read from the status.
import test from 'ava';
import { APPROVAL_VERDICT_PREFIX, HOLD_LABEL } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import type { Decision, Observed } from '../../../../gate/core/types.ts';
import { RunObserver, type TransitionSink } from '../../../../gate/telemetry/observer.ts';
import type { AttemptSpan, RunSpan, Tracing } from '../../../../gate/telemetry/tracing.ts';
import { answer, apply, at, heldRevision, hook, observed } from '../core/_builders.ts';

function recorder() {
  const calls: string[] = [];
  const spans: (AttemptSpan | RunSpan)[] = [];
  const sink: TransitionSink = {
    attemptEnded: (h, transport, outcome, s) => calls.push(`attempt ${h} ${transport} ${outcome} ${s}s`),
    resent: (h, transport) => calls.push(`resent ${h} ${transport}`),
    retried: (h) => calls.push(`retried ${h}`),
    runEnded: (outcome) => calls.push(`run ${outcome}`),
    held: (s) => calls.push(`held ${s}s`),
    brokenGlass: (phase) => calls.push(`break-glass ${phase}`),
    approvalWaited: (verdict, s) => calls.push(`approval ${verdict} ${s}s`),
  };
  const tracing: Tracing = {
    enabled: true,
    traceparent: () => '',
    recordRun: (s) => spans.push(s),
    recordAttempt: (s) => spans.push(s),
    traceReplies: (record) => record,
    shutdown: async () => undefined,
  };
  return { calls, spans, observer: new RunObserver(sink, tracing) };
}

/** One reconcile as the controller runs it: decide, tell the observer, apply. */
function reconcile(observer: RunObserver, o: Observed, seconds: number): Observed {
  const now = { ...o, now: at(seconds) };
  const decision = decide(now);
  observer.reconciled(now, decision);
  return apply(now, decision.actions);
}

const db = hook('db');

test('a hook that answers and a release: one attempt, one run, the hold from creation to release', (t) => {
  const { calls, spans, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0); // creates the run, asking db
  o = reconcile(observer, o, 1); // the informer brings the run: no resend
  o = answer({ ...o, now: at(6) }, 'db'); // the reply, written by any replica
  o = reconcile(observer, o, 7); // releases
  reconcile(observer, o, 8); // nothing more happens, nothing more is counted
  t.deepEqual(calls, ['attempt db http succeeded 6s', 'run released', 'held 7s']);
  t.like(spans[0], { hook: 'db', attempt: 1, outcome: 'succeeded', transport: 'http', start: at(0), end: at(6), resends: 0 });
  t.like(spans[1], { phase: 'Released', start: at(0), end: at(7), revision: 'hello-00001' });
});

test('a resend, a timeout, then an admin retry', (t) => {
  const { calls, spans, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 20); // resendInterval 20s
  o = reconcile(observer, o, 60); // timeout 60s
  t.deepEqual(calls, ['resent db http', 'attempt db http timed_out 60s', 'run failed']);
  t.like(spans[0], { outcome: 'timed_out', resends: 1 });
  o = { ...o, run: { ...(o.run as NonNullable<Observed['run']>), retryToken: '2' } };
  o = reconcile(observer, o, 90);
  t.deepEqual(calls.slice(3), ['retried db']);
  t.is(o.run?.status?.hooks[0]?.attempt, 2);
});

test('a new leadership term starts from what it sees: nothing earlier is counted again', (t) => {
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 0);
  observer.reset();
  o = answer({ ...o, now: at(3) }, 'db');
  reconcile(observer, o, 4);
  t.deepEqual(calls, [], 'the first look of a term only learns the state');
});

test('a hold removed by someone else while the hook failed is a break-glass release, counted once', (t) => {
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 0);
  o = answer({ ...o, now: at(2) }, 'db', { outcome: 'failed', message: 'no quota' });
  o = reconcile(observer, o, 3);
  const labels = { ...o.revision.labels };
  delete labels[HOLD_LABEL];
  o = { ...o, revision: { ...o.revision, labels } };
  o = reconcile(observer, o, 10);
  reconcile(observer, o, 11);
  t.deepEqual(calls, ['attempt db http failed 2s', 'run failed', 'break-glass Failed']);
});

test('a hold removed by hand counts as break glass even when the gate still has the condition to write', (t) => {
  // The Revision's condition is written a second after the state it shows (background-writes.ts): the
  // reconcile after the hand-made release may still want to write it. That is no release of the gate's.
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0);
  o = answer({ ...o, now: at(2) }, 'db', { outcome: 'failed', message: 'no quota' });
  o = reconcile(observer, o, 3);
  const labels = { ...o.revision.labels };
  delete labels[HOLD_LABEL];
  const unheld = { ...o, revision: { ...o.revision, labels }, now: at(10) };
  const condition = { type: 'setRevisionCondition', condition: { type: 'x', status: 'False', lastTransitionTime: '' } } as const;
  observer.reconciled(unheld, { actions: [condition] as Decision['actions'] });
  t.true(calls.includes('break-glass Failed'));
});

test("the gate's own release is no break-glass", (t) => {
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 0);
  o = answer({ ...o, now: at(1) }, 'db');
  o = reconcile(observer, o, 1);
  // A cache behind the release: the Revision unheld, the run still Running.
  const stale: Observed = {
    ...o,
    run: { ...(o.run as NonNullable<Observed['run']>), status: { ...o.run?.status, phase: 'Running' } as never },
  };
  observer.reconciled(stale, { actions: [] } satisfies Decision);
  t.false(calls.some((c) => c.startsWith('break-glass')));
});

test('a released Revision forgotten (its run finished in the cache) is remembered no more, and a later look counts nothing', (t) => {
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db']), [db]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 1);
  o = answer({ ...o, now: at(6) }, 'db');
  o = reconcile(observer, o, 7); // releases
  o = reconcile(observer, o, 8);
  t.is(observer.remembered, 1);
  observer.forget(o.revision.uid);
  t.is(observer.remembered, 0);
  reconcile(observer, o, 9); // looked at again (its finalizer, say): learnt, not counted
  t.deepEqual(calls, ['attempt db http succeeded 6s', 'run released', 'held 7s']);
});

test('an approval on a held Revision: the wait runs from the request of the hooks it waits on', (t) => {
  const { calls, observer } = recorder();
  const approval = hook('approval');
  let o = observed(heldRevision(['approval']), [approval]);
  o = reconcile(observer, o, 5); // creates the run, asking approval
  o = reconcile(observer, o, 6);
  o = {
    ...o,
    revision: { ...o.revision, annotations: { ...o.revision.annotations, [`${APPROVAL_VERDICT_PREFIX}0123456789abcdef`]: 'approved' } },
  };
  o = reconcile(observer, o, 20);
  reconcile(observer, o, 21);
  t.deepEqual(calls, ['approval approved 15s'], 'one approval, measured once');
});
