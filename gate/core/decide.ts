/*
 * decide(): the reconcile decision for one Revision, from one observation. The shell applies the
 * actions in the order given; decide() on the state those actions produce returns no actions
 * (apart from sends that come due later), so a reconcile that runs twice does no harm.
 *
 * One phase decides, the first whose case holds; each is a function of gate/core/decide/, and
 * docs/design.md §3 is the reference table (what each observes and does, step by step):
 *
 *   deleting                  the Revision is being deleted           decide/cancel.ts
 *   foreignRun                a run of an older Revision of this name (wait for garbage collection)
 *   finishInterruptedRelease  not held, the run's last write lost     decide/release.ts
 *   startRun                  held, no run                            decide/start-run.ts
 *   releaseAgain              held, run Released                      decide/release.ts
 *   keepCancelled             held, run Cancelled                     decide/cancel.ts
 *   cancelSuperseded          held, a newer Revision took its place   decide/cancel.ts
 *   advanceRun                held, run in progress                   decide/advance.ts
 *
 * Every send names the run by its UID (the event id and the correlation id carry it), so a reply
 * to a deleted run never counts for the run created after it; every request carries the run's
 * spec.containers, never the Revision's.
 */
import { HOLD_LABEL } from '../../api/types.ts';
import { advanceRun } from './decide/advance.ts';
import { cancelSuperseded, deleting, keepCancelled } from './decide/cancel.ts';
import { finishInterruptedRelease, releaseAgain } from './decide/release.ts';
import { startRun } from './decide/start-run.ts';
import type { Decision, Observed } from './types.ts';

export { DIGEST_GRACE_MS, HOOK_CACHE_GRACE_MS } from './decide/start-run.ts';

/** How long to wait before looking again when a run of an older Revision with this name still exists. */
export const FOREIGN_RUN_REQUEUE_MS = 10_000;

export function decide(o: Observed): Decision {
  const { revision } = o;
  const run = o.run?.spec.revisionUID === revision.uid ? o.run : undefined;
  const held = revision.labels[HOLD_LABEL] === 'true';
  if (revision.deleting) return deleting(o, run, held);
  if (o.run && !run) return foreignRun();
  if (!held) return run ? finishInterruptedRelease(o, run) : { actions: [] };
  if (!run) return startRun(o);
  const status = run.status;
  if (status?.phase === 'Released') return releaseAgain(o, run, status);
  if (status?.phase === 'Cancelled') return keepCancelled(o, status);
  if (o.supersededBy !== undefined && !o.namedByTraffic) return cancelSuperseded(o, run, o.supersededBy);
  return advanceRun(o, run);
}

/** The run named after this Revision belongs to an older one of the same name: left for the garbage collector. */
function foreignRun(): Decision {
  return { actions: [], requeueAfterMs: FOREIGN_RUN_REQUEUE_MS };
}
