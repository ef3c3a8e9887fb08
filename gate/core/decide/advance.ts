// Held, run in progress: the run advances one step of its life per pass, in named steps
// (docs/design.md §3 "advanceRun"): containers, adminRetry, deadlines, nextStage, judge, then
// release or hold, deferStartedStatus and the wakeup.
import type { ContainerImage, PrestartRunStatus, PrestartRunView, RunPhase } from '../../../api/types.ts';
import { IMAGES_CHANGED, imagesChangedCondition, sameContainers, waitingForDigests } from '../containers.ts';
import { type SendClock, STARTED_STATUS_DELAY_MS, startStage } from '../first-stage.ts';
import { idRunUID } from '../reply.ts';
import { expireOrResend, nextWakeup } from '../resend.ts';
import { retryHoldReason, withRetries } from '../retry-after.ts';
import {
  compact,
  derivePhase,
  type HookEntry,
  isFailure,
  joinHooks,
  jsonEqual,
  type ReadyCondition,
  readyFor,
  readyOf,
  setCondition,
  summaryOf,
} from '../status.ts';
import type { Action, Decision, Observed } from '../types.ts';
import { baseStatus } from './base-status.ts';
import { event, failureHoldReason, holdReasonActions, imagesChangedHoldReason, newlyFailed, retryMessage } from './hold-reason.ts';
import { hasContributions, releaseAction } from './release.ts';

export function advanceRun(o: Observed, run: PrestartRunView): Decision {
  const recorded = run.spec.containers;
  const current = o.revision.containers;
  if (!recorded && !current) return awaitDigests(o, run);
  // containers: what the hooks are asked about, recorded first, in the list's first write (record, then send).
  const containers = (recorded ?? current) as ContainerImage[];
  const record: Action[] = recorded ? [] : [{ type: 'recordContainers', containers }];
  const now = o.now.getTime();
  const nowIso = o.now.toISOString();
  const prev = run.status;
  const base = baseStatus(o, run);
  const sends: Action[] = [];
  const events: Action[] = [];

  const retry = adminRetry(run, base, joinHooks(run.spec, base.hooks), events);
  const clock: SendClock = { now, nowIso, runUID: idRunUID(run), leaderSince: o.leaderSince?.getTime(), sent: o.sent };
  const deadlinesMet = retry.entries.map((e) => expireOrResend(e, clock, sends));
  const entries = startStage(deadlinesMet, clock, sends);
  const { phase, ready, imagesChanged } = judge(base, entries, containers, current);

  const hooks = entries.map((e) => e.status);
  const status: PrestartRunStatus = compact({
    phase,
    hooks,
    conditions: setCondition(base.conditions, ready, nowIso),
    observedRetry: retry.observedRetry,
    releasedAt: phase === 'Released' ? nowIso : undefined,
    summary: summaryOf(hooks),
  });
  const store = deferStartedStatus(run, base, status, now);

  const actions: Action[] = [...record];
  if (phase === 'Released') {
    // Release goes first, so the Revision starts as early as possible; a crash before the status
    // write is finished by finishInterruptedRelease (or releaseAgain if the informer is stale).
    actions.push(...holdReasonActions(o, undefined));
    actions.push(releaseAction(hasContributions(status), containers));
    if (store.now) actions.push({ type: 'updateRunStatus', status });
    actions.push(...sends); // Audit hooks requested as the Revision is released (record, then send)
    events.push(event('Normal', 'Released', ready.message ?? ''));
  } else {
    if (store.now) actions.push({ type: 'updateRunStatus', status });
    actions.push(...sends);
    // While Running: the line of each hook waiting to be asked again (retry-after.ts), else none.
    const reason =
      phase !== 'Failed'
        ? retryHoldReason(entries)
        : imagesChanged
          ? imagesChangedHoldReason(run, imagesChanged.message ?? '')
          : failureHoldReason(run, entries);
    actions.push(...holdReasonActions(o, reason));
    if (phase === 'Failed' && reason !== undefined && newlyFailed(prev, ready)) {
      events.push(event('Warning', ready.reason ?? 'HookFailed', reason));
    }
  }
  actions.push(...events);
  const wakeup = Math.min(nextWakeup(entries, clock) ?? Number.POSITIVE_INFINITY, store.afterMs ?? Number.POSITIVE_INFINITY);
  return Number.isFinite(wakeup) ? { actions, requeueAfterMs: wakeup } : { actions };
}

/**
 * containers, before anything else: a run that recorded no containers while Knative has not
 * resolved every digest asks, sends, times out and releases nothing (a run of an earlier release
 * included: its requests would go out without the containers); its Ready condition says what it
 * waits for. Knative's own status update wakes the Revision.
 */
function awaitDigests(o: Observed, run: PrestartRunView): Decision {
  const base = baseStatus(o, run);
  // A run that already failed keeps its failure; it is what the hold reason shows.
  if (base.phase === 'Failed') return { actions: [] };
  const status = compact({ ...base, conditions: setCondition(base.conditions, waitingForDigests(o.revision), o.now.toISOString()) });
  return { actions: jsonEqual(run.status, status) ? [] : [{ type: 'updateRunStatus', status }] };
}

/**
 * adminRetry: a retry token the run has not acted on yet sets its Failed and TimedOut hooks
 * Pending with attempt + 1. Hooks not found (or invalid) when the run started cannot retry.
 */
function adminRetry(
  run: PrestartRunView,
  base: PrestartRunStatus,
  entries: HookEntry[],
  events: Action[],
): { entries: HookEntry[]; observedRetry: string | undefined } {
  if (run.retryToken === undefined || run.retryToken === base.observedRetry) return { entries, observedRetry: base.observedRetry };
  const retried: string[] = [];
  const stuck: string[] = [];
  const next = entries.map((e): HookEntry => {
    if (!isFailure(e.status.phase)) return e;
    if (!e.snapshot) {
      stuck.push(e.status.name);
      return e;
    }
    retried.push(e.status.name);
    return { snapshot: e.snapshot, status: { name: e.status.name, phase: 'Pending', attempt: e.status.attempt + 1 } };
  });
  events.push(event('Normal', 'Retrying', retryMessage(run.retryToken, retried, stuck)));
  return { entries: next, observedRetry: run.retryToken };
}

/**
 * judge: the run's phase from its hooks, and the image guard: all passed but Knative's digests
 * (or their being resolved at all) differ from what the hooks were asked about -> Failed, never
 * released, and final (kept from the stored condition): only a new run, which asks every hook
 * again, releases. A digest that moves after the hooks answered deserves a person's look, not a
 * silent re-run a tenant could repeat at will.
 */
function judge(
  base: PrestartRunStatus,
  entries: readonly HookEntry[],
  containers: ContainerImage[],
  current: ContainerImage[] | undefined,
): { phase: RunPhase; ready: ReadyCondition; imagesChanged: ReadyCondition | undefined } {
  const phase = derivePhase(entries);
  const changedBefore = base.phase === 'Failed' && readyOf(base)?.reason === IMAGES_CHANGED ? readyOf(base) : undefined;
  const imagesChanged =
    changedBefore ??
    (phase === 'Released' && !sameContainers(containers, current) ? imagesChangedCondition(containers, current) : undefined);
  if (imagesChanged) return { phase: 'Failed', ready: imagesChanged, imagesChanged };
  // A running run's Ready message also names each hook waiting to be asked again, when and why.
  const ready = phase === 'Running' ? withRetries(readyFor(phase, entries), entries) : readyFor(phase, entries);
  return { phase, ready, imagesChanged: undefined };
}

/**
 * deferStartedStatus: a run started with its first stage asked (startRun) has an implied status;
 * the first reply's write stores it, or this pass once STARTED_STATUS_DELAY_MS passed without one,
 * so a quick hook costs one write. Anything else that changed the status is stored now.
 */
function deferStartedStatus(
  run: PrestartRunView,
  base: PrestartRunStatus,
  status: PrestartRunStatus,
  now: number,
): { now: boolean; afterMs?: number } {
  if (jsonEqual(run.status, status)) return { now: false };
  if (run.status === undefined && run.spec.startedAt !== undefined && jsonEqual(base, status)) {
    const due = Date.parse(run.spec.startedAt) + STARTED_STATUS_DELAY_MS - now;
    if (due > 0) return { now: false, afterMs: due };
  }
  return { now: true };
}
