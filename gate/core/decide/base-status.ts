// The status every phase works from.
import type { HookStatus, PrestartRunStatus, PrestartRunView } from '../../../api/types.ts';
import { runStatusOf } from '../first-stage.ts';
import { parseHookNames } from '../stamp.ts';
import { compact, notFound, summaryOf } from '../status.ts';
import type { Observed } from '../types.ts';

/**
 * The run's status as stored, or as a start recorded in spec.startedAt implies it
 * (first-stage.ts), or rebuilt from the spec when the run was created but its status never written.
 */
export function baseStatus(o: Observed, run: PrestartRunView): PrestartRunStatus {
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
