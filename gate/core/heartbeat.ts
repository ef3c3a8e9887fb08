// Heartbeats for long hooks: a hook with spec.heartbeatTimeout must show a sign of life
// (a progress reply) at least that often, so one that died is noticed in minutes while a healthy
// one may run for hours within `timeout`. The clock starts when the attempt is requested and
// restarts with each progress reply (HookStatus.lastProgressAt, set by applyReply). Resends do not
// count: they are the gate talking, not the hook.
import type { HookSnapshot, HookStatus } from '../../api/types.ts';
import { formatDuration } from './duration.ts';
import type { HookEntry } from './status.ts';

/** When a Requested hook's heartbeat runs out (ms since epoch); undefined without a heartbeatTimeout. */
export function heartbeatDue(status: HookStatus, snapshot: HookSnapshot): number | undefined {
  if (status.phase !== 'Requested' || !snapshot.heartbeatTimeoutSeconds) return undefined;
  const last = Date.parse(status.lastProgressAt ?? status.requestedAt ?? '');
  return Number.isNaN(last) ? undefined : last + snapshot.heartbeatTimeoutSeconds * 1000;
}

/** The entry as TimedOut when its heartbeat ran out before its deadline; undefined otherwise. */
export function heartbeatExpired(entry: HookEntry, now: number): HookEntry | undefined {
  const { status, snapshot } = entry;
  if (!snapshot) return undefined;
  const due = heartbeatDue(status, snapshot);
  if (due === undefined || now < due) return undefined;
  const since = status.lastProgressAt ? `its last progress report at ${status.lastProgressAt}` : `the request at ${status.requestedAt}`;
  const message = `no sign of life within ${formatDuration(snapshot.heartbeatTimeoutSeconds ?? 0)} (heartbeatTimeout) since ${since}`;
  return { snapshot, status: { ...status, phase: 'TimedOut', message } };
}
