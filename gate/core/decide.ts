/*
 * decide(): the reconcile decision for one Revision, from one observation. The shell applies the
 * actions in the order given; decide() on the state those actions produce returns no actions
 * (apart from sends that come due later), so a reconcile that runs twice does no harm.
 *
 * Rules, first match wins ("run" = the PrestartRun of this Revision's UID; "passed" = Succeeded,
 * or Failed/TimedOut under failurePolicy Ignore; "blocking" = Failed/TimedOut under Fail):
 *
 * | #  | Observed                                         | Actions, in order                                              |
 * |----|--------------------------------------------------|----------------------------------------------------------------|
 * | 1  | Revision deleting, run unfinished                | updateRunStatus(Cancelled: Pending/Requested hooks Cancelled), |
 * |    |                                                  | removeFinalizer, sendCancel per Requested hook, Normal         |
 * |    |                                                  | Cancelled. (Unheld and all passed: as rule 4, then remove.)    |
 * | 2  | Revision deleting, otherwise                     | removeFinalizer when ours is still there                       |
 * | 3  | a run for another UID (old Revision, same name)  | nothing; requeue until garbage collection removes it           |
 * | 4  | not held, run neither Released nor Cancelled,    | updateRunStatus(Released), Normal Released: finishes a release |
 * |    | all hooks passed (a Requested hook past its      | interrupted between label removal and status write (the        |
 * |    | deadline counts as TimedOut, as step b made it)  | TimedOut of an Ignore hook may be in the status not written)   |
 * | 5  | not held, otherwise                              | nothing: unheld Revisions are never touched                    |
 * | 6  | held, no run, hooks annotation missing/malformed | setHoldReason + Warning InvalidHooksAnnotation (only when the  |
 * |    |                                                  | reason is not already there); never release: fail closed       |
 * | 7  | held, no run (new, or its run was deleted: the   | createRun: snapshots of the named hooks, spec.startedAt = now: |
 * |    | admin's way to start over)                       | the first stage Requested as step c would write it, implied    |
 * |    |                                                  | (first-stage.ts) and stored by step g; the shell sends         |
 * |    |                                                  | createRun.requests once the create returns); a                 |
 * |    |                                                  | hold reason left from before is cleared. A hook not found      |
 * |    |                                                  | (after HOOK_CACHE_GRACE_MS from the create: the apiserver may  |
 * |    |                                                  | stamp from a newer hook list than the cache's) or invalid is   |
 * |    |                                                  | Failed under Fail: then the others stay Pending,               |
 * |    |                                                  | nothing is requested and rule 11 follows (hold reason, event); |
 * |    |                                                  | the same when nothing holds (no hooks, or only Audit ones: the |
 * |    |                                                  | release is rule 11's) or rule 10 will cancel it (superseded).  |
 * |    |                                                  | spec.containers = revision.containers: what the hooks are      |
 * |    |                                                  | asked about. Not known yet (Knative has not                    |
 * |    |                                                  | resolved every digest): nothing for DIGEST_GRACE_MS after the  |
 * |    |                                                  | Revision's creation (requeue; Knative's status update wakes it |
 * |    |                                                  | sooner), then createRun without containers, Pending, Ready     |
 * |    |                                                  | Unknown ResolvingDigests, or False with Knative's reason and   |
 * |    |                                                  | message when its ContainerHealthy/ResourcesAvailable is False  |
 * |    |                                                  | (resolution failed; Knative retries): nothing is requested.    |
 * | 8  | held, run Released                               | release again (idempotent; stale cache or interrupted release) |
 * |    |                                                  | guarded by the run's spec.containers; when Knative's digests   |
 * |    |                                                  | differ: no release, hold reason ImagesChanged + Warning event  |
 * |    |                                                  | (the run is not written: Released is final, cached slim)       |
 * | 9  | held, run Cancelled                              | keep the hold reason; a cancelled run is final (delete the     |
 * |    |                                                  | PrestartRun to start over)                                     |
 * | 10 | held, superseded, not named by traffic           | as rule 1 with reason "superseded by <name>", no finalizer     |
 * |    |                                                  | removal, hold reason "prestart hooks cancelled: ..."           |
 * | 11 | held, run in progress                            | the steps below                                                |
 *
 * Rule 11, step by step on a working copy of the status:
 *   0. containers. The run records none and Knative has not resolved every digest ->
 *      only the Ready condition says what it waits for (as rule 7; a Failed run keeps its failure):
 *      nothing is requested, resent, timed out or released, since a request must name what will
 *      run. The run records none and Knative has resolved them -> recordContainers first, before
 *      any status write or send (record, then send). A run made by an earlier release (hooks
 *      already asked about the spec's images only) takes the same road: on upgrade it records
 *      the digests Knative reports then, unchecked, and is held to them from there on; its
 *      hooks are not asked again. What was resolved before the upgrade is not known to the gate.
 *   a. retry token new (!== observedRetry): Failed/TimedOut hooks -> Pending, attempt+1, fields
 *      cleared; observedRetry = token; Normal Retrying. Hooks not found at start cannot retry.
 *   b. Requested, last sent before this replica began to lead (leaderSince), deadline earlier than
 *      leaderSince + grace (grace = the resendInterval, 30s when resends are off, at most the
 *      timeout): the deadline came, or nearly, while no leader acted, so the hook's answer may
 *      have been lost in the outage -> deadline = now + grace, and one sendRequest now (unless
 *      resends are off): a hook that finished answers from memory. Deciding again changes
 *      nothing more (the deadline is now past leaderSince + grace).
 *      Requested and now >= deadline -> TimedOut "no reply within <timeout>".
 *      Requested with a heartbeatTimeout, silent that long since the request or its last progress
 *      reply (heartbeat.ts) -> TimedOut "no sign of life within <heartbeatTimeout> ...".
 *      Requested and now >= last sent + resendInterval -> sendRequest (same attempt), not written:
 *      "last sent" is this term's last send (Observed.sent), else the status's lastSentAt (resend.ts).
 *      Requested, last sent before leaderSince (by another replica, or by this process before a
 *      restart), resends on -> the same at once: sends are queued after the status records them,
 *      so a leader killed in between leaves recorded requests that never went out; hooks are
 *      idempotent (protocol rule 1), so asking again is safe.
 *   c. no blocking hook: the lowest order with Pending/Requested hooks is the current stage (every
 *      lower hook has passed, or it would be blocking); its Pending hooks -> Requested with
 *      requestedAt = lastSentAt = now, deadline = now + timeout, and one sendRequest each. A new
 *      run's first stage is requested this way in the status it is created with (rule 7).
 *   d. phase: any blocking -> Failed; all passed -> Released; all Pending -> Pending; else Running.
 *      Released, but revision.containers (unknown now, or any name, image or digest) differs from
 *      spec.containers -> Failed, Ready False ImagesChanged naming each container's recorded and
 *      current digest, hold reason with the remedy (delete the PrestartRun: a new run asks every
 *      hook about what will run), Warning ImagesChanged. The run fails rather than start over
 *      by itself: a digest that moves after the hooks answered is a tenant writing Knative's
 *      status or a tag moving mid-scan, and either deserves a person's look, not a silent re-run
 *      (which a tenant could repeat at will). Final: kept from the stored condition, even if the
 *      digests come back; a retry annotation does not lift it.
 *   e. Released: [setHoldReason(undefined) if set], release(inject, containers), updateRunStatus,
 *      Normal Released. Release goes first so the Revision starts as early as possible; a crash
 *      before the status write is finished by rule 4 (or rule 8 if the informer is stale). The
 *      release patch tests that Knative's status digests are still spec.containers
 *      (release-patch.ts), so a status write racing the decision fails it and the core looks again.
 *      Otherwise: updateRunStatus (only when it differs from the observed status), the sends
 *      (record, then send: a reply can never arrive for an attempt the status does not know),
 *      setHoldReason (failure line with the retry command when Failed, cleared otherwise; only
 *      when it differs from the annotation on the Revision), Warning HookFailed/HookTimedOut
 *      only when the Ready condition newly became False or its message changed.
 *   f. requeueAfterMs = time to the nearest deadline or resend of a Requested hook.
 *   g. a run started by rule 7 whose status is not stored: when the status decided equals the one
 *      its start implies, it is stored only once STARTED_STATUS_DELAY_MS passed (requeue then), so
 *      a quick reply's write stores the request and its answer at once; any other change now.
 *
 * Every send names the run by its UID (sendRequest.runUID): the event id and the correlationid
 * carry it, so a reply to a deleted run never counts for the run created after it. A new run's
 * UID is known only once the create returns, so its first requests are createRun.requests, which
 * the shell sends once the run recording them (spec.startedAt) is created, named by it.
 *
 * Every request carries the run's spec.containers (the shell reads them from the run it wrote or
 * created, never from the Revision). The admin's break glass (force-release.ts) releases without
 * the digest check, as it does without the hooks.
 *
 * Cancels are recorded before they are sent, and the finalizer goes before them too: a hook that
 * cannot be reached must never keep a Revision from being deleted, so a cancel is best effort.
 */

import {
  CANCEL_FINALIZER,
  type ContainerImage,
  HOLD_LABEL,
  HOOKS_ANNOTATION,
  type HookSnapshot,
  type HookStatus,
  type PrestartRunSpec,
  type PrestartRunStatus,
  type PrestartRunView,
  REASON_ANNOTATION,
  RETRY_ANNOTATION,
} from '../../api/types.ts';
import { IMAGES_CHANGED, imagesChangedCondition, imagesChangedMessage, sameContainers, waitingForDigests } from './containers.ts';
import { runStatusOf, type SendClock, STARTED_STATUS_DELAY_MS, startFirstStage, startStage } from './first-stage.ts';
import { idRunUID } from './reply.ts';
import { expired, expireOrResend, nextWakeup } from './resend.ts';
import { HookSpecError, snapshotHook } from './snapshot.ts';
import { parseHookNames } from './stamp.ts';
import {
  compact,
  contributionsOf,
  derivePhase,
  describeOutcome,
  type HookEntry,
  hasPassed,
  isBlocking,
  isFailure,
  isUnfinished,
  joinHooks,
  jsonEqual,
  notFound,
  oneLine,
  type ReadyCondition,
  readyFor,
  readyOf,
  setCondition,
  summaryOf,
} from './status.ts';
import type { Action, Decision, Observed } from './types.ts';

/** How long to wait before looking again when a run of an older Revision with this name still exists. */
export const FOREIGN_RUN_REQUEUE_MS = 10_000;

/**
 * How long after its creation a held Revision's run waits for Knative to resolve the digests
 * before it is created without them (Pending, ResolvingDigests). Knative's status update wakes
 * the Revision as soon as they are there; creationTimestamp has whole seconds, so the wait is
 * 1 to 2 s from the real moment.
 */
export const DIGEST_GRACE_MS = 2_000;
/** How long after its create a Revision may name a hook the gate's cache has not seen yet (createRun). */
export const HOOK_CACHE_GRACE_MS = 10_000;
const HOOK_CACHE_RECHECK_MS = 500;

export function decide(o: Observed): Decision {
  const { revision } = o;
  const run = o.run?.spec.revisionUID === revision.uid ? o.run : undefined;
  const held = revision.labels[HOLD_LABEL] === 'true';
  if (revision.deleting) return decideDeleting(o, run, held);
  if (o.run && !run) return { actions: [], requeueAfterMs: FOREIGN_RUN_REQUEUE_MS };
  if (!held) return run ? finishRelease(o, run) : { actions: [] };
  if (!run) return createRun(o);
  const status = run.status;
  if (status?.phase === 'Released') return releaseAgain(o, run, status);
  if (status?.phase === 'Cancelled') {
    return { actions: holdReasonActions(o, cancelledHoldReason(readyOf(status)?.message)) };
  }
  if (o.supersededBy !== undefined && !o.namedByTraffic) return cancel(o, run, `superseded by ${o.supersededBy}`, false);
  return advance(o, run);
}

function decideDeleting(o: Observed, run: PrestartRunView | undefined, held: boolean): Decision {
  const phase = run?.status?.phase;
  if (run && phase !== 'Released' && phase !== 'Cancelled') {
    const finished = held ? undefined : finishRelease(o, run);
    if (finished && finished.actions.length > 0) {
      // Status write, then the finalizer, then the event.
      return { actions: [...finished.actions.slice(0, 1), ...finalizerActions(o), ...finished.actions.slice(1)] };
    }
    return cancel(o, run, 'revision deleted', true);
  }
  return { actions: finalizerActions(o) };
}

function finalizerActions(o: Observed): Action[] {
  return o.revision.finalizers.includes(CANCEL_FINALIZER) ? [{ type: 'removeFinalizer' }] : [];
}

function createRun(o: Observed): Decision {
  const { revision } = o;
  const names = parseHookNames(revision.annotations);
  if (!names) {
    const problem =
      revision.annotations[HOOKS_ANNOTATION] === undefined
        ? `held, but the ${HOOKS_ANNOTATION} annotation is missing`
        : `held, but the ${HOOKS_ANNOTATION} annotation is not a JSON list of distinct hook names`;
    const actions = holdReasonActions(o, problem);
    if (actions.length > 0) actions.push(event('Warning', 'InvalidHooksAnnotation', problem));
    return { actions };
  }
  // The apiserver's stamp (config/230) reads PrestartHooks from its own watch, which can run ahead
  // of the gate's: a hook created a moment ago may be named before the gate's cache has it. A name
  // the cache lacks fails the hook only once the Revision is HOOK_CACHE_GRACE_MS old.
  if (names.some((name) => !o.hooks.get(name))) {
    const wait = revision.createdAt.getTime() + HOOK_CACHE_GRACE_MS - o.now.getTime();
    if (wait > 0) return { actions: [], requeueAfterMs: Math.min(wait, HOOK_CACHE_RECHECK_MS) };
  }
  const snapshots: HookSnapshot[] = [];
  const hooks: HookStatus[] = [];
  for (const name of names) {
    const hook = o.hooks.get(name);
    if (!hook) {
      hooks.push(notFound(name));
      continue;
    }
    try {
      snapshots.push(snapshotHook(hook));
      hooks.push({ name, phase: 'Pending', attempt: 1 });
    } catch (err) {
      if (!(err instanceof HookSpecError)) throw err;
      hooks.push({ name, phase: 'Failed', attempt: 1, message: err.message });
    }
  }
  const spec: PrestartRunSpec = { revisionUID: revision.uid, hooks: snapshots };
  if (!revision.containers) {
    // Nothing is asked before the run records what will run. Knative resolves the
    // digests in the background right after the create: a moment's wait keeps the common case
    // to one create that records the containers and the first requests together.
    const wait = revision.createdAt.getTime() + DIGEST_GRACE_MS - o.now.getTime();
    if (wait > 0) return { actions: [], requeueAfterMs: Math.min(wait, DIGEST_GRACE_MS) };
    // Longer, the run waits, Pending, saying so; rule 11 records the containers once Knative has them.
    const status: PrestartRunStatus = {
      phase: 'Pending',
      hooks,
      conditions: setCondition([], waitingForDigests(revision), o.now.toISOString()),
      summary: summaryOf(hooks),
    };
    return { actions: [{ type: 'createRun', spec, status, storeStatus: true, requests: [] }, ...holdReasonActions(o, undefined)] };
  }
  spec.containers = revision.containers;
  const started = createStarted(o, spec, hooks);
  if (started) return started;
  const status: PrestartRunStatus = {
    phase: 'Pending',
    hooks,
    conditions: setCondition([], readyFor('Pending', []), o.now.toISOString()),
    summary: summaryOf(hooks),
  };
  return { actions: [{ type: 'createRun', spec, status, storeStatus: true, requests: [] }] };
}

/**
 * Rule 8: a held Revision whose run is Released is released again, guarded by the containers the
 * run recorded, and only while Knative's digests are still those. When they are not, the
 * Revision stays held and says why; the run is not written (Released is final, and cached slim).
 */
function releaseAgain(o: Observed, run: PrestartRunView, status: PrestartRunStatus): Decision {
  const recorded = run.spec.containers;
  if (recorded && !sameContainers(recorded, o.revision.containers)) {
    const reason = imagesChangedHoldReason(run, imagesChangedMessage(recorded, o.revision.containers));
    const actions = holdReasonActions(o, reason);
    if (actions.length > 0) actions.push(event('Warning', IMAGES_CHANGED, reason));
    return { actions };
  }
  return { actions: [...holdReasonActions(o, undefined), releaseAction(hasContributions(status), recorded)] };
}

function releaseAction(inject: boolean, containers: ContainerImage[] | undefined): Action {
  return containers ? { type: 'release', inject, containers } : { type: 'release', inject };
}

/**
 * Rule 11 before anything else, for a run that recorded no containers while Knative has not
 * resolved every digest: nothing is asked, sent, timed out or released (a run of an earlier
 * release included: its requests would go out without the containers), and the run's Ready
 * condition says what it waits for. Knative's own status update wakes the Revision.
 */
function awaitDigests(o: Observed, run: PrestartRunView): Decision {
  const base = baseStatus(o, run);
  // A run that already failed keeps its failure; it is what the hold reason shows.
  if (base.phase === 'Failed') return { actions: [] };
  const status = compact({ ...base, conditions: setCondition(base.conditions, waitingForDigests(o.revision), o.now.toISOString()) });
  return { actions: jsonEqual(run.status, status) ? [] : [{ type: 'updateRunStatus', status }] };
}

/**
 * The run created with its first stage already Requested, as rule 11 step c would write it (the
 * spec's startedAt records it; the status is implied until step g or a reply stores it), and those
 * requests for the shell to send once the create returns: no status write and no watch round trip
 * before a hook is asked. Undefined when the new run should start
 * Pending and the next pass take it from there: a blocking hook (rule 11 writes its Warning event
 * and hold reason), nothing that holds (no hooks, or only Audit ones: the release and its event
 * are rule 11's), or a superseded Revision (rule 10 cancels it before anything is asked).
 */
function createStarted(o: Observed, spec: PrestartRunSpec, hooks: HookStatus[]): Decision | undefined {
  if (o.supersededBy !== undefined && !o.namedByTraffic) return undefined;
  const now = o.now.getTime();
  const nowIso = o.now.toISOString();
  // The run's UID is unknown until the create returns; the shell names the requests by it.
  const clock: SendClock = { now, nowIso, runUID: undefined, leaderSince: o.leaderSince?.getTime() };
  const sends: Action[] = [];
  const started = startFirstStage(spec, hooks, clock, sends);
  if (!started) return undefined;
  const requests = sends.flatMap((a) => (a.type === 'sendRequest' ? [{ hook: a.hook, attempt: a.attempt, deadline: a.deadline }] : []));
  // spec.startedAt records the requests: the status they imply (runStatusOf) is stored later (rule 11 step g).
  const actions: Action[] = [
    { type: 'createRun', spec: { ...spec, startedAt: nowIso }, status: started.status, storeStatus: false, requests },
    // A reason left from before (a failed run the admin deleted, a fixed annotation) goes, as rule 11 would clear it.
    ...holdReasonActions(o, undefined),
  ];
  const requeueAfterMs = Math.min(nextWakeup(started.entries, clock) ?? Number.POSITIVE_INFINITY, STARTED_STATUS_DELAY_MS);
  return { actions, requeueAfterMs };
}

/**
 * The status to work from: as stored, or as a start recorded in spec.startedAt implies it
 * (first-stage.ts), or rebuilt from the spec when the run was created but its status never written.
 */
function baseStatus(o: Observed, run: PrestartRunView): PrestartRunStatus {
  const stored = runStatusOf(run);
  if (stored) return stored;
  const inSpec = new Set(run.spec.hooks.map((h) => h.name));
  const names = parseHookNames(o.revision.annotations) ?? [];
  const hooks: HookStatus[] = names.map((name) => (inSpec.has(name) ? { name, phase: 'Pending', attempt: 1 } : notFound(name)));
  for (const s of run.spec.hooks) {
    if (!names.includes(s.name)) hooks.push({ name: s.name, phase: 'Pending', attempt: 1 });
  }
  // A token already present when the run was created is not a request to retry.
  return compact({ phase: 'Pending', hooks, conditions: [], observedRetry: run.retryToken, summary: summaryOf(hooks) });
}

function finishRelease(o: Observed, run: PrestartRunView): Decision {
  const prev = run.status;
  if (prev?.phase === 'Released' || prev?.phase === 'Cancelled') return { actions: [] };
  const base = baseStatus(o, run);
  const now = o.now.getTime();
  // The pass that released may have timed out an Ignore hook in the status it never wrote.
  const entries = joinHooks(run.spec, base.hooks).map((e) => expired(e, now) ?? e);
  if (!entries.every(hasPassed)) return { actions: [] };
  const nowIso = o.now.toISOString();
  const ready = readyFor('Released', entries);
  const hooks = entries.map((e) => e.status);
  const status: PrestartRunStatus = {
    ...base,
    phase: 'Released',
    hooks,
    conditions: setCondition(base.conditions, ready, nowIso),
    releasedAt: nowIso,
    summary: summaryOf(hooks),
  };
  return { actions: [{ type: 'updateRunStatus', status }, event('Normal', 'Released', ready.message ?? '')] };
}

function cancel(o: Observed, run: PrestartRunView, why: string, deleting: boolean): Decision {
  const prev = run.status;
  const base = baseStatus(o, run);
  const entries = joinHooks(run.spec, base.hooks);
  const sends: Action[] = [];
  const cancelled: string[] = [];
  const hooks = entries.map(({ status, snapshot }): HookStatus => {
    if (!isUnfinished(status.phase)) return status;
    if (status.phase === 'Requested' && snapshot) {
      sends.push({ type: 'sendCancel', runUID: idRunUID(run), hook: snapshot, attempt: status.attempt, reason: why });
    }
    cancelled.push(status.name);
    return { ...status, phase: 'Cancelled', message: why };
  });
  const ready = readyFor('Cancelled', entries, why);
  const status: PrestartRunStatus = compact({
    ...base,
    phase: 'Cancelled',
    hooks,
    conditions: setCondition(base.conditions, ready, o.now.toISOString()),
    summary: summaryOf(hooks),
  });
  const actions: Action[] = [];
  if (!jsonEqual(prev, status)) actions.push({ type: 'updateRunStatus', status });
  if (deleting) actions.push(...finalizerActions(o));
  actions.push(...sends);
  if (!deleting) actions.push(...holdReasonActions(o, cancelledHoldReason(ready.message)));
  if (prev?.phase !== 'Cancelled') {
    const which = cancelled.length > 0 ? `cancelled hooks ${cancelled.join(', ')}` : 'cancelled the run';
    actions.push(event('Normal', 'Cancelled', `${which}: ${why}`));
  }
  return { actions };
}

function advance(o: Observed, run: PrestartRunView): Decision {
  const recorded = run.spec.containers;
  const current = o.revision.containers;
  if (!recorded && !current) return awaitDigests(o, run);
  // What the hooks are asked about: recorded first, in the list's first write (record, then send).
  const containers = (recorded ?? current) as ContainerImage[];
  const record: Action[] = recorded ? [] : [{ type: 'recordContainers', containers }];
  const now = o.now.getTime();
  const nowIso = o.now.toISOString();
  const prev = run.status;
  const base = baseStatus(o, run);
  const sends: Action[] = [];
  const events: Action[] = [];
  let entries = joinHooks(run.spec, base.hooks);
  let observedRetry = base.observedRetry;

  if (run.retryToken !== undefined && run.retryToken !== base.observedRetry) {
    const retried: string[] = [];
    const stuck: string[] = [];
    entries = entries.map((e) => {
      if (!isFailure(e.status.phase)) return e;
      if (!e.snapshot) {
        stuck.push(e.status.name);
        return e;
      }
      retried.push(e.status.name);
      return { snapshot: e.snapshot, status: { name: e.status.name, phase: 'Pending', attempt: e.status.attempt + 1 } };
    });
    observedRetry = run.retryToken;
    events.push(event('Normal', 'Retrying', retryMessage(run.retryToken, retried, stuck)));
  }

  const clock: SendClock = { now, nowIso, runUID: idRunUID(run), leaderSince: o.leaderSince?.getTime(), sent: o.sent };
  entries = entries.map((e) => expireOrResend(e, clock, sends));
  entries = startStage(entries, clock, sends);

  let phase = derivePhase(entries);
  let ready = readyFor(phase, entries);
  // Step d': the digests changed after the hooks were asked -> Failed, never released; and final
  // (kept from the stored condition): only a new run, which asks every hook again, releases.
  const changedBefore = base.phase === 'Failed' && readyOf(base)?.reason === IMAGES_CHANGED ? readyOf(base) : undefined;
  const imagesChanged =
    changedBefore ??
    (phase === 'Released' && !sameContainers(containers, current) ? imagesChangedCondition(containers, current) : undefined);
  if (imagesChanged) {
    phase = 'Failed';
    ready = imagesChanged;
  }
  const hooks = entries.map((e) => e.status);
  const status: PrestartRunStatus = compact({
    phase,
    hooks,
    conditions: setCondition(base.conditions, ready, nowIso),
    observedRetry,
    releasedAt: phase === 'Released' ? nowIso : undefined,
    summary: summaryOf(hooks),
  });
  let changed = !jsonEqual(prev, status);
  // Step g: a started run's implied status is stored by the first reply's write, or by this once
  // STARTED_STATUS_DELAY_MS passed without one; anything else that changed it is stored now.
  let storeAfterMs: number | undefined;
  if (changed && prev === undefined && run.spec.startedAt !== undefined && jsonEqual(base, status)) {
    const due = Date.parse(run.spec.startedAt) + STARTED_STATUS_DELAY_MS - now;
    if (due > 0) {
      changed = false;
      storeAfterMs = due;
    }
  }

  const actions: Action[] = [...record];
  if (phase === 'Released') {
    actions.push(...holdReasonActions(o, undefined));
    actions.push(releaseAction(hasContributions(status), containers));
    if (changed) actions.push({ type: 'updateRunStatus', status });
    actions.push(...sends); // Audit hooks requested as the Revision is released (record, then send)
    events.push(event('Normal', 'Released', ready.message ?? ''));
  } else {
    if (changed) actions.push({ type: 'updateRunStatus', status });
    actions.push(...sends);
    const reason =
      phase !== 'Failed'
        ? undefined
        : imagesChanged
          ? imagesChangedHoldReason(run, imagesChanged.message ?? '')
          : failureHoldReason(run, entries);
    actions.push(...holdReasonActions(o, reason));
    if (phase === 'Failed' && reason !== undefined && newlyFailed(prev, ready)) {
      events.push(event('Warning', ready.reason ?? 'HookFailed', reason));
    }
  }
  actions.push(...events);
  const wakeup = Math.min(nextWakeup(entries, clock) ?? Number.POSITIVE_INFINITY, storeAfterMs ?? Number.POSITIVE_INFINITY);
  return Number.isFinite(wakeup) ? { actions, requeueAfterMs: wakeup } : { actions };
}

/** The same rule the Pod webhook injects by, so the inject label is set exactly when a pod gets something. */
function hasContributions(status: PrestartRunStatus): boolean {
  return contributionsOf(status).length > 0;
}

function newlyFailed(prev: PrestartRunStatus | undefined, ready: ReadyCondition): boolean {
  const before = readyOf(prev);
  return !(before?.status === 'False' && before.reason === ready.reason && before.message === ready.message);
}

/** One line for the Revision's reason annotation, which the hold policy's denial message shows. */
function failureHoldReason(run: PrestartRunView, entries: readonly HookEntry[]): string {
  const blocking = entries.filter(isBlocking);
  const what = oneLine(blocking.map((e) => describeOutcome(e.status)).join('; '), 768);
  const retryable = blocking.every((e) => e.snapshot !== undefined && isFailure(e.status.phase));
  const hint = retryable
    ? `retry: kubectl annotate prestartrun ${run.name} -n ${run.namespace} ${RETRY_ANNOTATION}=${nextRetryToken(blocking, run.retryToken)} --overwrite`
    : `start over: kubectl delete prestartrun ${run.name} -n ${run.namespace}`;
  return `${what}; ${hint}`;
}

/** A token the admin can copy: the next attempt number, made different from the one already acted on. */
/** The images changed after the hooks were asked: only a new run (every hook again, on what will run) can release. */
function imagesChangedHoldReason(run: PrestartRunView, what: string): string {
  return `${what}; to run every hook on what will run: kubectl delete prestartrun ${run.name} -n ${run.namespace}`;
}

function nextRetryToken(blocking: readonly HookEntry[], current: string | undefined): string {
  const next = Math.max(1, ...blocking.map((e) => e.status.attempt)) + 1;
  return String(next) === current ? `${next}-again` : String(next);
}

function cancelledHoldReason(readyMessage: string | undefined): string {
  return `prestart hooks ${readyMessage ?? 'cancelled'}`;
}

function retryMessage(token: string, retried: readonly string[], stuck: readonly string[]): string {
  const parts = [retried.length > 0 ? `re-running ${retried.join(', ')}` : 'no failed hook to re-run'];
  if (stuck.length > 0) {
    parts.push(`cannot retry ${stuck.join(', ')} (missing or invalid when the run started: delete the PrestartRun to start over)`);
  }
  return `retry ${JSON.stringify(token)}: ${parts.join('; ')}`;
}

function holdReasonActions(o: Observed, desired: string | undefined): Action[] {
  const current = o.revision.annotations[REASON_ANNOTATION];
  return current === desired ? [] : [{ type: 'setHoldReason', reason: desired }];
}

function event(eventType: 'Normal' | 'Warning', reason: string, message: string): Action {
  return { type: 'recordEvent', eventType, reason, message };
}
