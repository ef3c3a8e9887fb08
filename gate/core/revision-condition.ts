// The hold in kn's own view: a condition of the gate's own type (PRESTART_CONDITION) on the
// Revision's status, so `kn revision describe` / `kubectl describe revision` name the hook that
// holds the Revision, its phase, progress, last message and deadline, and after a failure the
// reason and the retry command. It mirrors the run status decide()'s actions leave behind and is
// decided after them (decide-revision.ts): it never changes what decide() decides.
//
// kn prints a condition's reason in its table and the message only with --verbose, so the reason
// is the short human line (hook, phase, progress, deadline, message; the retry command after a
// failure) and the message the full one. Severity is always Info (see PRESTART_CONDITION).
import {
  type Condition,
  HOLD_LABEL,
  type HookStatus,
  PRESTART_CONDITION,
  type PrestartRunStatus,
  type PrestartRunView,
  RETRY_ANNOTATION,
} from '../../api/types.ts';
import { shortTime } from './duration.ts';
import { runStatusOf } from './first-stage.ts';
import { isWaitingToRetry, retryLine } from './retry-after.ts';
import { describeOutcome, isFailure, oneLine, readyOf } from './status.ts';
import type { Action, Decision, Observed } from './types.ts';

export type RevisionCondition = Omit<Condition, 'lastTransitionTime'>;

const MAX_REASON = 200;
const MAX_MESSAGE = 2048;

/** The commands a person holding the Revision's name can run next. */
export function retryCommand(namespace: string, revision: string): string {
  return `kn prestart retry ${revision} -n ${namespace}`;
}
export function getCommand(namespace: string, revision: string): string {
  return `kn prestart get ${revision} -n ${namespace}`;
}

/** The condition for a run in this status; run names equal their Revision's. */
export function revisionConditionFor(namespace: string, revision: string, status: PrestartRunStatus): RevisionCondition {
  const base = { type: PRESTART_CONDITION, severity: 'Info' as const };
  const ready = readyOf(status);
  switch (status.phase) {
    case 'Pending':
      return { ...base, status: 'Unknown', reason: 'Pending', message: 'waiting to request hooks' };
    case 'Released':
      return { ...base, status: 'True', reason: 'Released', message: ready?.message ?? 'released' };
    case 'Cancelled':
      return { ...base, status: 'False', reason: 'Cancelled', message: ready?.message ?? 'cancelled' };
    case 'Running': {
      const waiting = status.hooks.filter((h) => h.phase === 'Requested' || h.phase === 'Pending');
      const current = waiting.filter((h) => h.phase === 'Requested');
      const first = current[0] ?? waiting[0];
      const more = current.length > 1 ? ` (+${current.length - 1} more)` : '';
      const reason = first ? `${holdLine(first, true)}${more}` : 'Running';
      const message = [...waiting.map((h) => holdLine(h, false)), `details: ${getCommand(namespace, revision)}`].join('; ');
      return { ...base, status: 'Unknown', reason: oneLine(reason, MAX_REASON), message: oneLine(message, MAX_MESSAGE) };
    }
    case 'Failed': {
      const failed = status.hooks.filter((h) => isFailure(h.phase) || h.phase === 'Cancelled');
      const what = failed.length > 0 ? failed.map(describeOutcome).join('; ') : (ready?.message ?? 'a hook failed');
      const retry = retryCommand(namespace, revision);
      const kubectl = `kubectl annotate prestartrun ${revision} -n ${namespace} ${RETRY_ANNOTATION}=<new value> --overwrite`;
      return {
        ...base,
        status: 'False',
        reason: oneLine(`${oneLine(what, MAX_REASON - retry.length - 9)}; retry: ${retry}`, MAX_REASON + 20),
        message: oneLine(`${what}; retry: ${retry} (or ${kubectl}); details: ${getCommand(namespace, revision)}`, MAX_MESSAGE),
      };
    }
  }
}

/** "db Requested 40%, deadline 12:03:05Z: migrating"; the long form names the attempt and the whole deadline. */
function holdLine(h: HookStatus, short: boolean): string {
  // Waiting to ask again: when, which attempt, and the hook's reason (retry-after.ts).
  if (isWaitingToRetry(h)) {
    const line = retryLine(h, undefined, short ? 96 : 512);
    return short ? line : `${line}, deadline ${h.deadline ?? 'unknown'}`;
  }
  const progress = h.progress === undefined ? '' : short ? ` ${h.progress}%` : `, ${h.progress}%`;
  const attempt = short ? '' : `, attempt ${h.attempt}`;
  const deadline = h.deadline ? `, deadline ${short ? shortTime(h.deadline) : h.deadline}` : '';
  const head = `${h.name} ${h.phase}${attempt}${progress}${deadline}`;
  const said = h.message ? `${head}: ${oneLine(h.message, short ? 96 : 512)}` : head;
  return !short && h.details ? `${said} (details: ${h.details})` : said;
}

function sameCondition(a: Condition | undefined, b: RevisionCondition): boolean {
  return (
    a !== undefined &&
    a.status === b.status &&
    (a.reason ?? '') === (b.reason ?? '') &&
    (a.message ?? '') === (b.message ?? '') &&
    (a.severity ?? '') === (b.severity ?? '')
  );
}

/**
 * The last step of every decision: when the run status the actions leave differs from what the
 * Revision's condition shows, set it (last, after the release and the run's own status). Not on a
 * Revision being deleted, nor on one that never showed it and is no longer held (unheld Revisions
 * are left alone; one that showed it gets its final state).
 */
export function withRevisionCondition(o: Observed, d: Decision): Decision {
  const { revision } = o;
  const held = revision.labels[HOLD_LABEL] === 'true';
  if (revision.deleting) return d;
  const status = statusAfter(o, d);
  if (!status) return d;
  const existing = revision.conditions?.find((c) => c.type === PRESTART_CONDITION);
  if (!held && !existing) return d;
  const desired = revisionConditionFor(revision.namespace, revision.name, status);
  if (sameCondition(existing, desired)) return d;
  const lastTransitionTime = existing && existing.status === desired.status ? existing.lastTransitionTime : o.now.toISOString();
  const action: Action = { type: 'setRevisionCondition', condition: { ...desired, lastTransitionTime } };
  return { ...d, actions: [...d.actions, action] };
}

/** The run status once the actions are applied: the last one written, else the observed one of this Revision's run. */
function statusAfter(o: Observed, d: Decision): PrestartRunStatus | undefined {
  for (let i = d.actions.length - 1; i >= 0; i--) {
    const a = d.actions[i];
    if (a?.type === 'updateRunStatus' || a?.type === 'createRun') return a.status;
  }
  const run: PrestartRunView | undefined = o.run?.spec.revisionUID === o.revision.uid ? o.run : undefined;
  return run && runStatusOf(run);
}
