// Break glass: an admin whom RBAC grants the verb force-release on prestartruns
// cluster-wide annotates a held Revision's run (`kn prestart release REV --force --reason TEXT`;
// the hold policy checks the verb and that the -by annotation names the requester). The gate
// releases the Revision without its hooks: unfinished hooks are cancelled (and told so), the run
// records who and why (status.forcedRelease), and a Warning ForceReleased Event says it. Checked
// before decide()'s rules for a Revision with a run in progress; a Released or Cancelled run is
// left to them. No spec changes, so a GitOps tool has nothing to revert.
import { HOLD_LABEL, type HookStatus, type PrestartRunStatus, REASON_ANNOTATION } from '../../api/types.ts';
import { runStatusOf } from './first-stage.ts';
import { idRunUID } from './reply.ts';
import { compact, contributionsOf, isUnfinished, joinHooks, oneLine, setCondition, summaryOf } from './status.ts';
import type { Action, Decision, Observed } from './types.ts';

export function forceRelease(o: Observed): Decision | undefined {
  const { revision } = o;
  const run = o.run?.spec.revisionUID === revision.uid ? o.run : undefined;
  if (!run?.forceRelease || revision.deleting) return undefined;
  // Unheld with the run not yet Released: the release went through and the status write is still
  // to do (the shell stops a list at the release, decide's finishInterruptedRelease cannot finish a run whose hooks
  // did not pass). Only the gate removes the hold label (policy 2), so this is our own release.
  const held = revision.labels[HOLD_LABEL] === 'true';
  const prev = runStatusOf(run);
  if (prev?.phase === 'Released' || prev?.phase === 'Cancelled') return undefined;
  const nowIso = o.now.toISOString();
  const reason = oneLine(run.forceRelease.reason, 512);
  const by = run.forceRelease.by || 'an admin';
  const why = `force-released by ${by}: ${reason}`;
  const sends: Action[] = [];
  const hooks = joinHooks(run.spec, prev?.hooks ?? []).map(({ status, snapshot }): HookStatus => {
    if (!isUnfinished(status.phase)) return status;
    if (status.phase === 'Requested' && snapshot) {
      sends.push({ type: 'sendCancel', runUID: idRunUID(run), hook: snapshot, attempt: status.attempt, reason: why });
    }
    return { ...status, phase: 'Cancelled', message: why };
  });
  const status: PrestartRunStatus = compact({
    ...(prev ?? { conditions: [] }),
    phase: 'Released' as const,
    hooks,
    conditions: setCondition(prev?.conditions ?? [], { type: 'Ready', status: 'True', reason: 'ForceReleased', message: why }, nowIso),
    releasedAt: nowIso,
    summary: summaryOf(hooks),
    forcedRelease: { reason, by, at: nowIso },
  });
  const actions: Action[] = [];
  if (held) {
    if (revision.annotations[REASON_ANNOTATION] !== undefined) actions.push({ type: 'setHoldReason', reason: undefined });
    // Release first (as decide's advanceRun); a crash or a stop after it is finished by the unheld branch above.
    actions.push({ type: 'release', inject: contributionsOf(status).length > 0 });
  }
  actions.push({ type: 'updateRunStatus', status });
  actions.push(...sends);
  actions.push({ type: 'recordEvent', eventType: 'Warning', reason: 'ForceReleased', message: `released without its hooks, ${why}` });
  return { actions };
}
