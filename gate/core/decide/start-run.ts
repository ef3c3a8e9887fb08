// Held, no run yet (new, or its run was deleted: the admin's way to start over): the run is
// created from the hooks the stamp named, with its first stage already asked when it can be.
import { HOOKS_ANNOTATION, type HookSnapshot, type HookStatus, type PrestartRunSpec, type PrestartRunStatus } from '../../../api/types.ts';
import { waitingForDigests } from '../containers.ts';
import { type SendClock, STARTED_STATUS_DELAY_MS, startFirstStage } from '../first-stage.ts';
import { nextWakeup } from '../resend.ts';
import { HookSpecError, snapshotHook } from '../snapshot.ts';
import { parseHookNames } from '../stamp.ts';
import { notFound, readyFor, setCondition, summaryOf } from '../status.ts';
import type { Action, Decision, Observed } from '../types.ts';
import { event, holdReasonActions } from './hold-reason.ts';

/**
 * How long after its creation a held Revision's run waits for Knative to resolve the digests
 * before it is created without them (Pending, ResolvingDigests). Knative's status update wakes
 * the Revision as soon as they are there; creationTimestamp has whole seconds, so the wait is
 * 1 to 2 s from the real moment.
 */
export const DIGEST_GRACE_MS = 2_000;
/** How long after its create a Revision may name a hook the gate's cache has not seen yet. */
export const HOOK_CACHE_GRACE_MS = 10_000;
const HOOK_CACHE_RECHECK_MS = 500;

/**
 * A missing or malformed hooks annotation keeps the hold with a reason (fail closed). A hook not
 * found or invalid is Failed from the start (under Fail the run then fails: advanceRun writes the
 * reason and the event). The run records the Revision's containers once Knative resolved them:
 * what the hooks are asked about.
 */
export function startRun(o: Observed): Decision {
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
    // Longer, the run waits, Pending, saying so; advanceRun records the containers once Knative has them.
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
 * The run created with its first stage already Requested, as advanceRun's nextStage step would
 * write it (the spec's startedAt records it; the status is implied until deferStartedStatus or a
 * reply stores it), and those requests for the shell to send once the create returns: no status
 * write and no watch round trip before a hook is asked. Undefined when the new run should start
 * Pending and the next pass take it from there: a blocking hook (advanceRun writes its Warning
 * event and hold reason), nothing that holds (no hooks, or only Audit ones: the release and its
 * event are advanceRun's), or a superseded Revision (cancelSuperseded ends it before anything is asked).
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
  // spec.startedAt records the requests: the status they imply (runStatusOf) is stored later.
  const actions: Action[] = [
    { type: 'createRun', spec: { ...spec, startedAt: nowIso }, status: started.status, storeStatus: false, requests },
    // A reason left from before (a failed run the admin deleted, a fixed annotation) goes, as advanceRun would clear it.
    ...holdReasonActions(o, undefined),
  ];
  const requeueAfterMs = Math.min(nextWakeup(started.entries, clock) ?? Number.POSITIVE_INFINITY, STARTED_STATUS_DELAY_MS);
  return { actions, requeueAfterMs };
}
