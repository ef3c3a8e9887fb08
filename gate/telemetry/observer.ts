// Turns what the leader's reconciles see into metrics and spans: an attempt that ended, a resend,
// an admin retry, a run released, failed or cancelled, a hold broken by someone else, an approval.
// The core decides and the shell writes; this only compares each reconcile's outcome (the status
// the decision writes, or the one observed) with the last one this leader saw for that Revision,
// so each transition is counted once by the one replica that leads, whichever replica wrote it
// (a reply lands on any replica; the leader's informer brings it here). Durations come from the
// timestamps in the status, not from when this process noticed.
import type { HookPhase, HookStatus, PrestartRunStatus, RunPhase } from '../../api/types.ts';
import { APPROVAL_VERDICT_PREFIX, HOLD_LABEL } from '../../api/types.ts';
import { runStatusOf, sendKey } from '../core/index.ts';
import type { Decision, Observed } from '../core/types.ts';
import type { AttemptOutcome, Tracing } from './tracing.ts';

/** What the observer reports to; gate/telemetry/metrics.ts backs it with prom-client. */
export interface TransitionSink {
  attemptEnded(hook: string, transport: string, outcome: AttemptOutcome, seconds: number): void;
  resent(hook: string, transport: string): void;
  retried(hook: string): void;
  runEnded(outcome: 'released' | 'failed' | 'cancelled'): void;
  held(seconds: number): void;
  brokenGlass(phase: RunPhase | 'None'): void;
  approvalWaited(verdict: string, seconds: number): void;
  /** An Audit (shadow) hook's attempt ended: what it would have decided. */
  auditOutcome?(hook: string, outcome: AttemptOutcome): void;
}

interface SeenHook {
  phase: HookPhase;
  attempt: number;
  resends: number;
  /** The attempt answered retry: the gate waits to ask again (gate/core/retry-after.ts). */
  waiting?: boolean;
}

interface Seen {
  held: boolean;
  /** Undefined when this leader created the run and has not seen its UID yet. */
  runUID?: string;
  phase?: RunPhase;
  hooks: Map<string, SeenHook>;
  approval?: string;
  brokenGlass?: boolean;
}

const OPEN: ReadonlySet<HookPhase> = new Set(['Pending', 'Requested']);
const OUTCOMES: Partial<Record<HookPhase, AttemptOutcome>> = {
  Succeeded: 'succeeded',
  Failed: 'failed',
  TimedOut: 'timed_out',
  Cancelled: 'cancelled',
};
/**
 * Revisions remembered at most; the oldest seen is forgotten first. A bound only: the controller
 * has the observer forget each Revision once its run is finished and nothing is left to do for it
 * (forget()), so what is remembered is what is held or still moving.
 */
const MAX_REMEMBERED = 20_000;

export class RunObserver {
  private seen = new Map<string, Seen>();

  constructor(
    private readonly sink: TransitionSink,
    private readonly tracing: Tracing,
  ) {}

  /** A new leadership term: what an earlier term (or another leader) saw may be stale. */
  reset(): void {
    this.seen = new Map();
  }

  /**
   * The Revision's run is Released or Cancelled as the cache shows it, and the Revision is not held:
   * no transition of it is left to count, and no view the controller reads can step back behind
   * that (otherwise each Revision's entry is kept, up to MAX_REMEMBERED). Should it be observed
   * again (its finalizer, a failed reconcile), it is as new: nothing is counted from that look.
   */
  forget(revisionUID: string): void {
    this.seen.delete(revisionUID);
  }

  /** How many Revisions are remembered (tests, benches). */
  get remembered(): number {
    return this.seen.size;
  }

  /** Called by the controller with each observation and the decision made from it (before it is applied). */
  reconciled(o: Observed, d: Decision): void {
    const rev = o.revision;
    const run = o.run?.spec.revisionUID === rev.uid ? o.run : undefined;
    const decided = decidedStatus(d);
    const status = decided ?? (run ? runStatusOf(run) : undefined);
    const prev = this.seen.get(rev.uid);
    const sameRun = prev !== undefined && run !== undefined && (prev.runUID === undefined || prev.runUID === run.uid);
    const held = rev.labels[HOLD_LABEL] === 'true';
    const now = o.now.getTime();
    const next: Seen = { held, runUID: run?.uid, phase: status?.phase, hooks: new Map(), approval: firstVerdict(rev.annotations) };
    if (prev?.brokenGlass) next.brokenGlass = true;

    const resent = resendsIn(d, run ? runStatusOf(run) : undefined);
    for (const h of status?.hooks ?? []) {
      const before = sameRun ? prev.hooks.get(h.name) : undefined;
      // Never step back: a cache behind this leader's own last decision shows an older status.
      if (before && before.attempt === h.attempt && !OPEN.has(before.phase) && OPEN.has(h.phase)) {
        next.hooks.set(h.name, before);
        continue;
      }
      const seen: SeenHook = { phase: h.phase, attempt: h.attempt, resends: before?.attempt === h.attempt ? before.resends : 0 };
      if (h.phase === 'Requested' && h.retryAt !== undefined) seen.waiting = true;
      next.hooks.set(h.name, seen);
      const transport = run?.spec.hooks.find((s) => s.name === h.name)?.delivery.transport ?? 'unknown';
      // A resend is not written to the run (gate/core/resend.ts): it is counted as decided, a
      // request for an attempt the run already shows Requested.
      if (run && resent.has(sendKey(h.name, h.attempt)) && h.phase === 'Requested') {
        seen.resends++;
        this.sink.resent(h.name, transport);
      }
      if (!before || !run) continue;
      // An admin's retry re-runs a finished hook; the gate asking again after a retry reply is not one.
      if (h.attempt > before.attempt && !OPEN.has(before.phase)) this.sink.retried(h.name);
      if (h.attempt !== before.attempt) continue;
      // An attempt answered retry ends then (the reply's moment is not stored: now, as for a timeout).
      const outcome = seen.waiting && !before.waiting ? 'retry' : OUTCOMES[h.phase];
      if (outcome && OPEN.has(before.phase) && h.requestedAt !== undefined) {
        const start = Date.parse(h.requestedAt);
        const end = outcome === 'retry' ? now : endOf(h, now);
        this.sink.attemptEnded(h.name, transport, outcome, Math.max(0, end - start) / 1000);
        if (run.spec.hooks.find((sn) => sn.name === h.name)?.mode === 'Audit') this.sink.auditOutcome?.(h.name, outcome);
        this.tracing.recordAttempt({
          runUID: run.uid,
          namespace: rev.namespace,
          revision: rev.name,
          hook: h.name,
          attempt: h.attempt,
          transport,
          start: new Date(start),
          end: new Date(end),
          outcome,
          resends: seen.resends,
          ...(h.message === undefined ? {} : { message: h.message }),
        });
      }
    }

    if (sameRun && prev.phase === 'Released' && next.phase !== 'Released') next.phase = 'Released';
    if (sameRun && run && next.phase !== prev.phase && status) this.runChanged(o, run.uid, status, now);

    // The gate releasing on an admin's force-release annotation is break glass too.
    if (decided?.forcedRelease && !run?.status?.forcedRelease) this.sink.brokenGlass(run?.status?.phase ?? 'None');

    // Unheld while the run neither released nor was cancelled, and the core has nothing to finish:
    // someone other than the gate took the hold off (break glass).
    const phase = run ? runStatusOf(run)?.phase : undefined;
    const gateReleased = prev?.phase === 'Released' || phase === 'Released' || phase === 'Cancelled';
    // (The condition and events the gate still writes for people are not a release it finishes.)
    const finishing = d.actions.some((a) => a.type === 'release' || a.type === 'updateRunStatus');
    if (prev?.held && !held && !prev.brokenGlass && !rev.deleting && !gateReleased && !finishing) {
      next.brokenGlass = true;
      this.sink.brokenGlass(phase ?? 'None');
    }

    // The first approval decision appeared on a held Revision: the wait is from when its current stage was asked.
    const approval = next.approval;
    if (prev && held && approval !== undefined && prev.approval === undefined) {
      const asked = (status?.hooks ?? [])
        .filter((h) => h.phase === 'Requested' && h.requestedAt)
        .map((h) => Date.parse(h.requestedAt ?? ''));
      if (asked.length > 0) this.sink.approvalWaited(approval, Math.max(0, now - Math.max(...asked)) / 1000);
    }

    this.seen.delete(rev.uid);
    this.seen.set(rev.uid, next);
    if (this.seen.size > MAX_REMEMBERED) this.seen.delete(this.seen.keys().next().value as string);
  }

  private runChanged(o: Observed, runUID: string, status: PrestartRunStatus, now: number): void {
    const rev = o.revision;
    const start = rev.createdAt;
    switch (status.phase) {
      case 'Released': {
        const end = parsedOr(status.releasedAt, now);
        this.sink.runEnded('released');
        this.sink.held(Math.max(0, end - start.getTime()) / 1000);
        this.tracing.recordRun({ runUID, namespace: rev.namespace, revision: rev.name, start, end: new Date(end), phase: 'Released' });
        return;
      }
      case 'Cancelled':
        this.sink.runEnded('cancelled');
        this.tracing.recordRun({ runUID, namespace: rev.namespace, revision: rev.name, start, end: new Date(now), phase: 'Cancelled' });
        return;
      case 'Failed':
        this.sink.runEnded('failed');
        return;
      default:
        return;
    }
  }
}

/** The status a decision writes (a new run's, or the last update), if it writes one. */
function decidedStatus(d: Decision): PrestartRunStatus | undefined {
  let status: PrestartRunStatus | undefined;
  for (const a of d.actions) {
    if (a.type === 'createRun' || a.type === 'updateRunStatus') status = a.status;
  }
  return status;
}

/** The hooks' attempts (sendKey) the decision asks again: requests for attempts the observed status already shows Requested. */
function resendsIn(d: Decision, observed: PrestartRunStatus | undefined): Set<string> {
  const requested = new Set((observed?.hooks ?? []).filter((h) => h.phase === 'Requested').map((h) => sendKey(h.name, h.attempt)));
  const resent = new Set<string>();
  for (const a of d.actions) {
    const key = a.type === 'sendRequest' ? sendKey(a.hook.name, a.attempt) : undefined;
    if (key !== undefined && requested.has(key)) resent.add(key);
  }
  return resent;
}

/** When an attempt ended: the hook's answer, else (a timeout, a cancel) now. */
function endOf(h: HookStatus, now: number): number {
  return parsedOr(h.answeredAt, now);
}

function parsedOr(iso: string | undefined, fallback: number): number {
  const t = Date.parse(iso ?? '');
  return Number.isNaN(t) ? fallback : t;
}

/** The verdict of the first approval decision found on a Revision: the wait for a person ends with the first one. */
function firstVerdict(annotations: Readonly<Record<string, string>>): string | undefined {
  for (const [key, value] of Object.entries(annotations)) if (key.startsWith(APPROVAL_VERDICT_PREFIX)) return value;
  return undefined;
}
