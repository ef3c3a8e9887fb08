// The phases that end a run before its release: the Revision is deleted, or a newer Revision of
// its Configuration supersedes it. Cancels are recorded before they are sent, and the finalizer
// goes before them too: a hook that cannot be reached must never keep a Revision from being
// deleted, so a cancel is best effort.
import { CANCEL_FINALIZER, type HookStatus, type PrestartRunStatus, type PrestartRunView } from '../../../api/types.ts';
import { idRunUID } from '../reply.ts';
import { withoutRetryAt } from '../retry-after.ts';
import { compact, isUnfinished, joinHooks, jsonEqual, readyFor, readyOf, setCondition, summaryOf } from '../status.ts';
import type { Action, Decision, Observed } from '../types.ts';
import { baseStatus } from './base-status.ts';
import { cancelledHoldReason, event, holdReasonActions } from './hold-reason.ts';
import { finishInterruptedRelease } from './release.ts';

/**
 * The Revision is being deleted (the finalizer keeps it visible). An unfinished run is cancelled:
 * the Requested hooks are told, the run is Cancelled, the finalizer removed. An unheld Revision
 * whose hooks all passed is a release to finish first. Otherwise only the finalizer goes.
 */
export function deleting(o: Observed, run: PrestartRunView | undefined, held: boolean): Decision {
  const phase = run?.status?.phase;
  if (run && phase !== 'Released' && phase !== 'Cancelled') {
    const finished = held ? undefined : finishInterruptedRelease(o, run);
    if (finished && finished.actions.length > 0) {
      // Status write, then the finalizer, then the event.
      return { actions: [...finished.actions.slice(0, 1), ...finalizerActions(o), ...finished.actions.slice(1)] };
    }
    return cancel(o, run, 'revision deleted', true);
  }
  return { actions: finalizerActions(o) };
}

/**
 * Held, superseded by a newer Revision of the same Configuration, and named by no traffic target:
 * cancelled as a deleted one is, but the finalizer stays and the hold reason says why.
 */
export function cancelSuperseded(o: Observed, run: PrestartRunView, by: string): Decision {
  return cancel(o, run, `superseded by ${by}`, false);
}

/** Held, run Cancelled: final (delete the PrestartRun to start over); the hold reason stays. */
export function keepCancelled(o: Observed, status: PrestartRunStatus): Decision {
  return { actions: holdReasonActions(o, cancelledHoldReason(readyOf(status)?.message)) };
}

function finalizerActions(o: Observed): Action[] {
  return o.revision.finalizers.includes(CANCEL_FINALIZER) ? [{ type: 'removeFinalizer' }] : [];
}

function cancel(o: Observed, run: PrestartRunView, why: string, isDeleting: boolean): Decision {
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
    return { ...withoutRetryAt(status), phase: 'Cancelled', message: why };
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
  if (isDeleting) actions.push(...finalizerActions(o));
  actions.push(...sends);
  if (!isDeleting) actions.push(...holdReasonActions(o, cancelledHoldReason(ready.message)));
  if (prev?.phase !== 'Cancelled') {
    const which = cancelled.length > 0 ? `cancelled hooks ${cancelled.join(', ')}` : 'cancelled the run';
    actions.push(event('Normal', 'Cancelled', `${which}: ${why}`));
  }
  return { actions };
}
