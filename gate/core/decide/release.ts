// The phases around a release that already happened: a held Revision whose run is Released is
// released again, and an unheld one whose run's status write was lost is finished.
import type { ContainerImage, PrestartRunStatus, PrestartRunView } from '../../../api/types.ts';
import { IMAGES_CHANGED, imagesChangedMessage, sameContainers } from '../containers.ts';
import { expired } from '../resend.ts';
import { contributionsOf, hasPassed, joinHooks, readyFor, setCondition, summaryOf } from '../status.ts';
import type { Action, Decision, Observed } from '../types.ts';
import { baseStatus } from './base-status.ts';
import { event, holdReasonActions, imagesChangedHoldReason } from './hold-reason.ts';

/**
 * Held, run Released: release again (idempotent: a stale cache or an interrupted release), guarded
 * by the containers the run recorded, and only while Knative's digests are still those. When they
 * are not, the Revision stays held and says why; the run is not written (Released is final, and
 * cached slim).
 */
export function releaseAgain(o: Observed, run: PrestartRunView, status: PrestartRunStatus): Decision {
  const recorded = run.spec.containers;
  if (recorded && !sameContainers(recorded, o.revision.containers)) {
    const reason = imagesChangedHoldReason(run, imagesChangedMessage(recorded, o.revision.containers));
    const actions = holdReasonActions(o, reason);
    if (actions.length > 0) actions.push(event('Warning', IMAGES_CHANGED, reason));
    return { actions };
  }
  return { actions: [...holdReasonActions(o, undefined), releaseAction(hasContributions(status), recorded)] };
}

/**
 * Not held, run neither Released nor Cancelled, every hook passed: a release interrupted between
 * the label's removal and the status write. The run is marked Released; a Requested hook past its
 * deadline counts as TimedOut (the pass that released may have timed out an Ignore hook in the
 * status it never wrote). Anything else about an unheld Revision is left alone.
 */
export function finishInterruptedRelease(o: Observed, run: PrestartRunView): Decision {
  const prev = run.status;
  if (prev?.phase === 'Released' || prev?.phase === 'Cancelled') return { actions: [] };
  const base = baseStatus(o, run);
  const now = o.now.getTime();
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

export function releaseAction(inject: boolean, containers: ContainerImage[] | undefined): Action {
  return containers ? { type: 'release', inject, containers } : { type: 'release', inject };
}

/** The same rule the Pod webhook injects by, so the inject label is set exactly when a pod gets something. */
export function hasContributions(status: PrestartRunStatus): boolean {
  return contributionsOf(status).length > 0;
}
