// What a held Revision says about itself: its reason annotation (which the hold policy's denial
// message and Knative's own error show) and the events recorded on it.

import type { PrestartRunStatus } from '../../../api/types.ts';
import { type PrestartRunView, REASON_ANNOTATION, RETRY_ANNOTATION } from '../../../api/types.ts';
import { describeOutcome, type HookEntry, isBlocking, isFailure, oneLine, type ReadyCondition, readyOf } from '../status.ts';
import type { Action, Observed } from '../types.ts';

/** Sets the reason annotation to `desired` (undefined: removes it), only when it differs. */
export function holdReasonActions(o: Observed, desired: string | undefined): Action[] {
  const current = o.revision.annotations[REASON_ANNOTATION];
  return current === desired ? [] : [{ type: 'setHoldReason', reason: desired }];
}

export function event(eventType: 'Normal' | 'Warning', reason: string, message: string): Action {
  return { type: 'recordEvent', eventType, reason, message };
}

/** One line for a failed run: what failed, and the command that retries it or starts over. */
export function failureHoldReason(run: PrestartRunView, entries: readonly HookEntry[]): string {
  const blocking = entries.filter(isBlocking);
  const what = oneLine(blocking.map((e) => describeOutcome(e.status)).join('; '), 768);
  const retryable = blocking.every((e) => e.snapshot !== undefined && isFailure(e.status.phase));
  const hint = retryable
    ? `retry: kubectl annotate prestartrun ${run.name} -n ${run.namespace} ${RETRY_ANNOTATION}=${nextRetryToken(blocking, run.retryToken)} --overwrite`
    : `start over: kubectl delete prestartrun ${run.name} -n ${run.namespace}`;
  return `${what}; ${hint}`;
}

/** The images changed after the hooks were asked: only a new run (every hook again, on what will run) can release. */
export function imagesChangedHoldReason(run: PrestartRunView, what: string): string {
  return `${what}; to run every hook on what will run: kubectl delete prestartrun ${run.name} -n ${run.namespace}`;
}

export function cancelledHoldReason(readyMessage: string | undefined): string {
  return `prestart hooks ${readyMessage ?? 'cancelled'}`;
}

/** A token the admin can copy: the next attempt number, made different from the one already acted on. */
function nextRetryToken(blocking: readonly HookEntry[], current: string | undefined): string {
  const next = Math.max(1, ...blocking.map((e) => e.status.attempt)) + 1;
  return String(next) === current ? `${next}-again` : String(next);
}

export function retryMessage(token: string, retried: readonly string[], stuck: readonly string[]): string {
  const parts = [retried.length > 0 ? `re-running ${retried.join(', ')}` : 'no failed hook to re-run'];
  if (stuck.length > 0) {
    parts.push(`cannot retry ${stuck.join(', ')} (missing or invalid when the run started: delete the PrestartRun to start over)`);
  }
  return `retry ${JSON.stringify(token)}: ${parts.join('; ')}`;
}

/** The Warning goes once per failure: when Ready newly became False, or its reason or message changed. */
export function newlyFailed(prev: PrestartRunStatus | undefined, ready: ReadyCondition): boolean {
  const before = readyOf(prev);
  return !(before?.status === 'False' && before.reason === ready.reason && before.message === ready.message);
}
