// What the observer counts: an Audit hook's outcome (what it would have decided), and
// a force-release by the gate as break glass, once.
import test from 'ava';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { RunObserver, type TransitionSink } from '../../../../gate/telemetry/observer.ts';
import type { Tracing } from '../../../../gate/telemetry/tracing.ts';
import { answer, apply, at, heldRevision, hook, observed } from '../core/_builders.ts';

function recorder() {
  const calls: string[] = [];
  const sink: TransitionSink = {
    attemptEnded: () => undefined,
    resent: () => undefined,
    retried: () => undefined,
    runEnded: (outcome) => calls.push(`run ${outcome}`),
    held: () => undefined,
    brokenGlass: (phase) => calls.push(`break-glass ${phase}`),
    approvalWaited: () => undefined,
    auditOutcome: (h, outcome) => calls.push(`audit ${h} ${outcome}`),
  };
  const tracing: Tracing = {
    enabled: false,
    traceparent: () => '',
    recordRun: () => undefined,
    recordAttempt: () => undefined,
    traceReplies: (record) => record,
    shutdown: async () => undefined,
  };
  return { calls, observer: new RunObserver(sink, tracing) };
}

function reconcile(observer: RunObserver, o: Observed, seconds: number): Observed {
  const now = { ...o, now: at(seconds) };
  const decision = decideRevision(now);
  observer.reconciled(now, decision);
  return apply(now, decision.actions);
}

test('an Audit hook’s failure is counted as what it would have decided', (t) => {
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db', 'scan']), [hook('db'), hook('scan', { mode: 'Audit' })]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 1);
  o = answer({ ...o, now: at(2) }, 'scan', { outcome: 'failed', message: 'CVE' });
  o = reconcile(observer, o, 2);
  t.deepEqual(calls, ['audit scan failed']);
});

test('a force-release is counted as break glass once, with the phase it ended', (t) => {
  const { calls, observer } = recorder();
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = reconcile(observer, o, 0);
  o = reconcile(observer, o, 1);
  o = answer({ ...o, now: at(2) }, 'db', { outcome: 'failed', message: 'boom' });
  o = reconcile(observer, o, 2);
  if (!o.run) throw new Error('no run');
  o = { ...o, run: { ...o.run, forceRelease: { reason: 'INC-1', by: 'alice' } } };
  o = reconcile(observer, o, 3);
  reconcile(observer, o, 4);
  t.deepEqual(
    calls.filter((c) => c.startsWith('break-glass')),
    ['break-glass Failed'],
  );
});
