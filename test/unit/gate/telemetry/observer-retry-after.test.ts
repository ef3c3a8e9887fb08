// The observer and a hook that answers retry: that attempt ends {outcome: retry} (not an error in
// its span), the gate asking again is not an admin's retry, and the next attempt is counted alone.
import test from 'ava';
import { decide } from '../../../../gate/core/decide.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { RunObserver, type TransitionSink } from '../../../../gate/telemetry/observer.ts';
import type { AttemptSpan, RunSpan, Tracing } from '../../../../gate/telemetry/tracing.ts';
import { answer, apply, at, heldRevision, hook, observed } from '../core/_builders.ts';

test('retry then success: attempt 1 ends retry, attempt 2 succeeded, no admin retry counted', (t) => {
  const calls: string[] = [];
  const spans: (AttemptSpan | RunSpan)[] = [];
  const sink: TransitionSink = {
    attemptEnded: (h, transport, outcome, s) => calls.push(`attempt ${h} ${transport} ${outcome} ${s}s`),
    resent: (h) => calls.push(`resent ${h}`),
    retried: (h) => calls.push(`retried ${h}`),
    runEnded: (outcome) => calls.push(`run ${outcome}`),
    held: (s) => calls.push(`held ${s}s`),
    brokenGlass: (phase) => calls.push(`break-glass ${phase}`),
    approvalWaited: (verdict) => calls.push(`approval ${verdict}`),
  };
  const tracing: Tracing = {
    enabled: true,
    traceparent: () => '',
    recordRun: (s) => spans.push(s),
    recordAttempt: (s) => spans.push(s),
    traceReplies: (record) => record,
    shutdown: async () => undefined,
  };
  const observer = new RunObserver(sink, tracing);
  const reconcile = (o: Observed, seconds: number): Observed => {
    const now = { ...o, now: at(seconds) };
    const decision = decide(now);
    observer.reconciled(now, decision);
    return apply(now, decision.actions);
  };
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = reconcile(o, 0);
  o = reconcile(o, 0);
  o = answer({ ...o, now: at(4) }, 'db', { outcome: 'retry', retryAfter: 5, message: 'quota busy' });
  o = reconcile(o, 4);
  o = reconcile(o, 9); // asks again: attempt 2
  o = answer({ ...o, now: at(12) }, 'db', { outcome: 'succeeded' });
  o = reconcile(o, 12);
  t.deepEqual(calls, ['attempt db http retry 4s', 'attempt db http succeeded 3s', 'run released', 'held 12s']);
  t.like(spans[0], { attempt: 1, outcome: 'retry' });
  t.like(spans[1], { attempt: 2, outcome: 'succeeded', start: at(9), end: at(12) });
});
