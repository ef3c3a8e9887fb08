// Shared reading of a PrestartRun's status: which hooks count as done, passed or blocking, how the
// run's phase and Ready condition follow from them. decide() and applyReply() both use these so
// the two writers of a run's status never disagree.

import type {
  Condition,
  Contribution,
  FailurePolicy,
  HookPhase,
  HookSnapshot,
  HookStatus,
  PrestartRunSpec,
  PrestartRunStatus,
  RunPhase,
} from '../../api/types.ts';
import { formatDuration } from './duration.ts';
import { hookKind, runOrder } from './namespaced-hooks.ts';

/** A hook's status joined with its snapshot; a hook without snapshot was not found when the run started. */
export interface HookEntry {
  status: HookStatus;
  snapshot: HookSnapshot | undefined;
}

export function joinHooks(spec: PrestartRunSpec, hooks: readonly HookStatus[]): HookEntry[] {
  const byName = new Map(spec.hooks.map((s) => [s.name, s]));
  const entries: HookEntry[] = hooks.map((status) => {
    const snapshot = byName.get(status.name);
    if (!snapshot && (status.phase === 'Pending' || status.phase === 'Requested')) {
      // Nothing could ever send it; keep the run from waiting forever.
      return { status: notFound(status.name, status.attempt), snapshot };
    }
    return { status, snapshot };
  });
  const seen = new Set(hooks.map((h) => h.name));
  for (const snapshot of spec.hooks) {
    if (!seen.has(snapshot.name)) entries.push({ status: { name: snapshot.name, phase: 'Pending', attempt: 1 }, snapshot });
  }
  return entries;
}

export function notFound(name: string, attempt = 1): HookStatus {
  return { name, phase: 'Failed', attempt, message: `${hookKind(name)} ${name} not found` };
}

export function policyOf(entry: HookEntry): FailurePolicy {
  return entry.snapshot?.failurePolicy ?? 'Fail';
}

export function orderOf(entry: HookEntry): number {
  return entry.snapshot ? runOrder(entry.snapshot) : Number.NEGATIVE_INFINITY;
}

/** spec.mode Audit: requested and recorded like any other hook, never holds or fails the Revision. */
export function isAudit(entry: HookEntry): boolean {
  return entry.snapshot?.mode === 'Audit';
}

export function isUnfinished(phase: HookPhase): boolean {
  return phase === 'Pending' || phase === 'Requested';
}

export function isFailure(phase: HookPhase): boolean {
  return phase === 'Failed' || phase === 'TimedOut';
}

/** Lets later stages and the release go ahead. */
export function hasPassed(entry: HookEntry): boolean {
  // An Audit (shadow) hook never holds, whatever it answers or whether it answered yet.
  if (isAudit(entry)) return true;
  const { phase } = entry.status;
  return phase === 'Succeeded' || (isFailure(phase) && policyOf(entry) === 'Ignore');
}

/** Keeps the Revision held until an admin retries. A Cancelled hook outside a cancelled run also blocks: fail closed. */
export function isBlocking(entry: HookEntry): boolean {
  if (isAudit(entry)) return false;
  const { phase } = entry.status;
  return (isFailure(phase) && policyOf(entry) === 'Fail') || phase === 'Cancelled';
}

export function derivePhase(entries: readonly HookEntry[]): RunPhase {
  if (entries.some(isBlocking)) return 'Failed';
  if (entries.every(hasPassed)) return 'Released';
  if (entries.every((e) => e.status.phase === 'Pending')) return 'Pending';
  return 'Running';
}

/** What the Revision's pods get: the contributions of the hooks that succeeded, in hook order. */
export function contributionsOf(status: Pick<PrestartRunStatus, 'hooks'> | undefined): Contribution[] {
  return (status?.hooks ?? []).flatMap((h) => (h.phase === 'Succeeded' ? (h.contributions ?? []) : []));
}

export function summaryOf(hooks: readonly HookStatus[]): string {
  return `${hooks.filter((h) => h.phase === 'Succeeded').length}/${hooks.length}`;
}

/** "hook db failed: <message>" / "hook db timed out: no reply within 1m". */
export function describeOutcome(status: HookStatus): string {
  const verb =
    status.phase === 'TimedOut'
      ? 'timed out'
      : status.phase === 'Failed'
        ? 'failed'
        : status.phase === 'Cancelled'
          ? 'was cancelled'
          : status.phase.toLowerCase();
  const text = status.message ? `hook ${status.name} ${verb}: ${oneLine(status.message, 256)}` : `hook ${status.name} ${verb}`;
  // The hook's details link goes wherever the outcome is told: run, hold reason, Events.
  return status.details ? `${text} (details: ${oneLine(status.details, 256)})` : text;
}

export function timeoutMessage(snapshot: HookSnapshot): string {
  return `no reply within ${formatDuration(snapshot.timeoutSeconds)}`;
}

export type ReadyCondition = Omit<Condition, 'lastTransitionTime'>;

export function readyFor(phase: RunPhase, entries: readonly HookEntry[], cancelReason?: string): ReadyCondition {
  switch (phase) {
    case 'Pending':
      return { type: 'Ready', status: 'Unknown', reason: 'Pending', message: 'waiting to request hooks' };
    case 'Running': {
      const waiting = entries.filter((e) => isUnfinished(e.status.phase) && !isAudit(e)).map((e) => e.status.name);
      return { type: 'Ready', status: 'Unknown', reason: 'Running', message: `waiting for ${waiting.join(', ')}` };
    }
    case 'Failed': {
      const blocking = entries.filter(isBlocking).map((e) => e.status);
      const first = blocking[0];
      const reason = first?.phase === 'TimedOut' ? 'HookTimedOut' : first?.phase === 'Cancelled' ? 'HookCancelled' : 'HookFailed';
      return { type: 'Ready', status: 'False', reason, message: blocking.map(describeOutcome).join('; ') };
    }
    case 'Released': {
      const ignored = entries.filter((e) => isFailure(e.status.phase) && !isAudit(e)).map((e) => describeOutcome(e.status));
      const succeeded = entries.filter((e) => e.status.phase === 'Succeeded').length;
      const base = `${succeeded}/${entries.length} hooks succeeded`;
      const parts = [base];
      if (ignored.length > 0) parts.push(`ignored (failurePolicy Ignore): ${ignored.join('; ')}`);
      // What the shadow hooks would have decided, had they been enforced.
      const audit = entries.filter((e) => isAudit(e) && e.status.phase !== 'Succeeded');
      if (audit.length > 0) parts.push(`audit only (would have held): ${audit.map((e) => describeOutcome(e.status)).join('; ')}`);
      return { type: 'Ready', status: 'True', reason: 'Released', message: parts.join('; ') };
    }
    case 'Cancelled':
      return { type: 'Ready', status: 'False', reason: 'Cancelled', message: `cancelled: ${cancelReason ?? 'unknown reason'}` };
  }
}

/** Kubernetes convention: lastTransitionTime moves only when the condition's status changes. */
export function setCondition(conditions: readonly Condition[], next: ReadyCondition, nowIso: string): Condition[] {
  const previous = conditions.find((c) => c.type === next.type);
  const lastTransitionTime = previous && previous.status === next.status ? previous.lastTransitionTime : nowIso;
  const merged: Condition = { ...next, lastTransitionTime };
  if (!previous) return [...conditions, merged];
  return conditions.map((c) => (c.type === next.type ? merged : c));
}

export function readyOf(status: PrestartRunStatus | undefined): Condition | undefined {
  return status?.conditions.find((c) => c.type === 'Ready');
}

/** Hook messages come from outside: one line, bounded, before they land in annotations and conditions. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Drops keys whose value is undefined, so equal statuses compare and serialise equal. */
export function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** Structural equality of JSON-like values; a key holding undefined counts as absent. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  }
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
