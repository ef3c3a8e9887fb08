// Starting a stage, and the status a new run starts with. A run the gate creates with its first
// stage requested carries the moment in spec.startedAt: the create is the record of
// those requests, so they go out as soon as it returns, and the status they imply is rebuilt from
// the spec wherever it is read (decide, applyReply, the kn views) until it is stored. It is stored
// by the first reply (one write records the request and its answer) or, when no reply came
// first, STARTED_STATUS_DELAY_MS later by decide, so `kubectl get prestartrun` shows it then.
import type { HookStatus, PrestartRunSpec, PrestartRunStatus, PrestartRunView } from '../../api/types.ts';
import { runOrder } from './namespaced-hooks.ts';
import {
  compact,
  derivePhase,
  type HookEntry,
  isAudit,
  isBlocking,
  isUnfinished,
  joinHooks,
  orderOf,
  readyFor,
  setCondition,
  summaryOf,
} from './status.ts';
import type { Action } from './types.ts';

/** How long a started run's implied status waits for a reply to store it before decide stores it alone. */
export const STARTED_STATUS_DELAY_MS = 1_000;

/** What the send rules need besides the hook: the time, the run the sends are for, and since when this replica leads. */
export interface SendClock {
  now: number;
  nowIso: string;
  /** The run UID its requests are named by; undefined for a run of an earlier release (v1 ids, RUN_IDS_ANNOTATION). */
  runUID: string | undefined;
  leaderSince: number | undefined;
  /** When this leader last sent each hook's attempt of this run (Observed.sent, keyed by resend.ts sendKey). */
  sent?: ReadonlyMap<string, number>;
}

/**
 * advanceRun's nextStage step: with no blocking hook, the lowest order with unfinished hooks is the stage;
 * its Pending hooks become Requested (requestedAt = lastSentAt = now, deadline = now + timeout),
 * one sendRequest each in `sends`.
 */
export function startStage(entries: HookEntry[], c: SendClock, sends: Action[]): HookEntry[] {
  // With no blocking hook, every hook below the lowest unfinished order has passed.
  if (entries.some(isBlocking)) return entries;
  // --- Audit (shadow) hooks never make a stage wait; each is requested with the stage
  // of its order, or at once when no Enforce hook of its order or lower is left ---
  const unfinished = entries.filter((e) => isUnfinished(e.status.phase) && !isAudit(e));
  const auditPending = entries.some((e) => isAudit(e) && e.status.phase === 'Pending');
  if (unfinished.length === 0 && !auditPending) return entries;
  const stage = unfinished.length > 0 ? Math.min(...unfinished.map(orderOf)) : Number.POSITIVE_INFINITY;
  return entries.map((e) => {
    const { status, snapshot } = e;
    if (status.phase !== 'Pending' || !snapshot) return e;
    if (isAudit(e) ? runOrder(snapshot) > stage : runOrder(snapshot) !== stage) return e;
    const deadline = new Date(c.now + snapshot.timeoutSeconds * 1000).toISOString();
    sends.push({ type: 'sendRequest', runUID: c.runUID, hook: snapshot, attempt: status.attempt, deadline });
    return {
      snapshot,
      status: { name: status.name, phase: 'Requested', attempt: status.attempt, requestedAt: c.nowIso, lastSentAt: c.nowIso, deadline },
    };
  });
}

export interface Started {
  entries: HookEntry[];
  status: PrestartRunStatus;
}

/**
 * The run's status with its first stage requested at c.now, or undefined when it should not
 * start that way (a blocking hook, or nothing that holds: advanceRun takes those). `hooks` are the
 * run's hook statuses before the start (all Pending for a run whose hooks were all found).
 */
export function startFirstStage(spec: PrestartRunSpec, hooks: HookStatus[], c: SendClock, sends: Action[]): Started | undefined {
  const joined = joinHooks(spec, hooks);
  if (joined.some(isBlocking)) return undefined;
  const entries = startStage(joined, c, sends);
  const phase = derivePhase(entries);
  if (phase !== 'Running') return undefined;
  const started = entries.map((e) => e.status);
  const status: PrestartRunStatus = compact({
    phase,
    hooks: started,
    conditions: setCondition([], readyFor(phase, entries), c.nowIso),
    summary: summaryOf(started),
  });
  return { entries, status };
}

/**
 * The status as stored, or, for a run created with its first stage requested whose status is not
 * stored yet, the status that start implies (the same startFirstStage computed at the create).
 */
export function runStatusOf(run: Pick<PrestartRunView, 'spec' | 'status'>): PrestartRunStatus | undefined {
  if (run.status) return run.status;
  const startedAt = Date.parse(run.spec.startedAt ?? '');
  if (Number.isNaN(startedAt)) return undefined;
  const pending = run.spec.hooks.map((s): HookStatus => ({ name: s.name, phase: 'Pending', attempt: 1 }));
  const clock: SendClock = { now: startedAt, nowIso: new Date(startedAt).toISOString(), runUID: undefined, leaderSince: undefined };
  return startFirstStage(run.spec, pending, clock, [])?.status;
}
