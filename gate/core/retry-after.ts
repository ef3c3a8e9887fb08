// A hook that cannot finish yet (a quota not free, a dependency not ready) answers `retry`: ask me
// again in N seconds. The attempt ends there: the hook is not busy with it, so the gate neither
// re-sends it nor times out its heartbeat. At the moment it named, the gate asks again as a new
// attempt (attempt + 1: a new CloudEvent id and correlationid, so a hook that deduplicates by id
// runs it afresh, protocol rule 1, and a late reply to the old attempt is refused as stale) with
// the same deadline: retries never extend the hook's timeout, and one due past the deadline is
// never sent (the hook times out at the deadline, as any other). Asking again is written before it
// is sent (record, then send), like a stage's first request.
//
// The PrestartHook bounds what a hook may ask (spec.retryAfter): a longer delay is cut to
// maxDelay, and the retry after maxRetries fails the hook (its failurePolicy decides the rest).
// retries counts the hook's `retry` replies since its stage or an admin's retry asked it first.
import type { HookSnapshot, HookStatus, Reply } from '../../api/types.ts';
import { formatDuration, shortTime } from './duration.ts';
import type { SendClock } from './first-stage.ts';
import { compact, type HookEntry, oneLine, timeoutMessage } from './status.ts';
import type { Action } from './types.ts';

/** spec.retryAfter's defaults: a hook that sets none may ask 10 times, each for at most 5 minutes. */
export const DEFAULT_RETRY_MAX_DELAY_SECONDS = 300;
export const DEFAULT_RETRY_MAX_RETRIES = 10;
const MAX_REASON = 512;

export interface RetryLimits {
  maxDelaySeconds: number;
  maxRetries: number;
}

export function retryLimitsOf(snapshot: HookSnapshot): RetryLimits {
  return snapshot.retryAfter ?? { maxDelaySeconds: DEFAULT_RETRY_MAX_DELAY_SECONDS, maxRetries: DEFAULT_RETRY_MAX_RETRIES };
}

/** A Requested hook whose last attempt answered `retry`: the gate waits to ask again. */
export function isWaitingToRetry(status: HookStatus): boolean {
  return status.phase === 'Requested' && status.retryAt !== undefined;
}

/**
 * The hook's status after a `retry` reply to its current, Requested attempt: waiting until the
 * (capped) delay, or Failed when the hook already used every retry its PrestartHook allows.
 */
export function applyRetryReply(current: HookStatus, snapshot: HookSnapshot, reply: Reply, now: Date): HookStatus {
  const limits = retryLimitsOf(snapshot);
  const reason = oneLine(reply.message ?? 'no reason given', MAX_REASON);
  const retries = (current.retries ?? 0) + 1;
  if (retries > limits.maxRetries) {
    const message =
      limits.maxRetries === 0
        ? `asked to be asked again, but PrestartHook ${snapshot.name} allows no retries (spec.retryAfter.maxRetries 0): ${reason}`
        : `still not ready after ${limits.maxRetries} retries (spec.retryAfter.maxRetries of PrestartHook ${snapshot.name}): ${reason}`;
    return compact<HookStatus>({
      name: current.name,
      phase: 'Failed',
      attempt: current.attempt,
      requestedAt: current.requestedAt,
      lastSentAt: current.lastSentAt,
      answeredAt: now.toISOString(),
      deadline: current.deadline,
      message,
      details: current.details,
      retries: current.retries,
      retryReason: reason,
    });
  }
  const asked = typeof reply.retryAfter === 'number' && reply.retryAfter >= 1 ? Math.floor(reply.retryAfter) : 1;
  const delay = Math.min(asked, limits.maxDelaySeconds);
  // A delay over the admin's bound is cut to it, and the reason says so.
  const capped = asked > delay ? ` (asked for ${formatDuration(asked)}, cut to spec.retryAfter.maxDelay ${formatDuration(delay)})` : '';
  const next: HookStatus = {
    ...current,
    retryAt: new Date(now.getTime() + delay * 1000).toISOString(),
    retries,
    retryReason: `${reason}${capped}`,
  };
  if (typeof reply.details === 'string' && reply.details.trim() !== '') next.details = oneLine(reply.details, 1024);
  return next;
}

/**
 * advanceRun's deadlines step for a hook waiting to be asked again: not re-sent and no heartbeat (the hook is
 * not working on anything); TimedOut at its deadline; at retryAt, asked again as attempt + 1 with
 * the same deadline (written, then sent). A retry that came due while no leader acted is asked at
 * once, its deadline moved as the deadlines step moves an outage's (`graceMs`).
 */
export function retryOrWait(entry: HookEntry, c: SendClock, deadline: number, graceMs: number, sends: Action[]): HookEntry {
  const { status, snapshot } = entry;
  if (!snapshot || !isWaitingToRetry(status)) return entry;
  const retryAt = Date.parse(status.retryAt ?? '');
  const due = Number.isNaN(retryAt) ? c.now : retryAt;
  let until = deadline;
  if (c.leaderSince !== undefined && due < c.leaderSince && deadline < c.leaderSince + graceMs) {
    until = Math.max(deadline, c.now + graceMs);
  }
  if (c.now >= until) return timedOutWaiting(entry, new Date(until).toISOString());
  if (c.now < due) return entry;
  const deadlineIso = until === deadline && status.deadline !== undefined ? status.deadline : new Date(until).toISOString();
  const attempt = status.attempt + 1;
  sends.push({ type: 'sendRequest', runUID: c.runUID, hook: snapshot, attempt, deadline: deadlineIso });
  const asked = compact<HookStatus>({
    name: status.name,
    phase: 'Requested',
    attempt,
    requestedAt: c.nowIso,
    lastSentAt: c.nowIso,
    deadline: deadlineIso,
    details: status.details,
    retries: status.retries,
    retryReason: status.retryReason,
  });
  return { snapshot, status: asked };
}

/** When a waiting hook next needs a look: its retry, or its deadline when that comes first. */
export function retryWakeup(status: HookStatus, deadline: number): number | undefined {
  if (!isWaitingToRetry(status)) return undefined;
  const retryAt = Date.parse(status.retryAt ?? '');
  return Math.min(deadline, Number.isNaN(retryAt) ? 0 : retryAt);
}

/**
 * "quota retrying at 12:00:40Z (attempt 3, retry 2 of 10): quota busy": one stable line (an
 * absolute time, so it is written once, not every second) for the run's Ready message, the hold
 * reason and the Revision's condition. `snapshot` gives the limit when known.
 */
export function retryLine(status: HookStatus, snapshot: HookSnapshot | undefined, maxReason = 256): string {
  const limit = snapshot ? ` of ${retryLimitsOf(snapshot).maxRetries}` : '';
  const when = shortTime(status.retryAt ?? '');
  const reason = status.retryReason ? `: ${oneLine(status.retryReason, maxReason)}` : '';
  return `${status.name} retrying at ${when} (attempt ${status.attempt + 1}, retry ${status.retries ?? 1}${limit})${reason}`;
}

/** The hold reason while hooks wait to be asked again (Knative's own message shows it); undefined when none waits. */
export function retryHoldReason(entries: readonly HookEntry[]): string | undefined {
  const waiting = entries.filter((e) => isWaitingToRetry(e.status));
  if (waiting.length === 0) return undefined;
  return `hook ${oneLine(waiting.map((e) => retryLine(e.status, e.snapshot)).join('; hook '), 900)}`;
}

/** The status without retryAt: a hook that stops waiting (cancelled, timed out) keeps the count and the reason. */
export function withoutRetryAt(status: HookStatus): HookStatus {
  const { retryAt: _retryAt, ...rest } = status;
  return rest;
}

/** A hook still waiting to be asked again when its deadline came: TimedOut, saying what it waited for. */
export function timedOutWaiting(entry: HookEntry, deadlineIso: string): HookEntry {
  const { status, snapshot } = entry;
  if (!snapshot) return entry;
  const { retryAt, ...rest } = status;
  const message = `${timeoutMessage(snapshot)}; it had asked to be asked again at ${retryAt}: ${status.retryReason ?? ''}`;
  return { snapshot, status: { ...rest, phase: 'TimedOut', deadline: deadlineIso, message } };
}

/** The run's Ready message while it runs, with the line of each hook waiting to be asked again. */
export function withRetries<T extends { message?: string }>(ready: T, entries: readonly HookEntry[]): T {
  const waiting = entries.filter((e) => isWaitingToRetry(e.status));
  if (waiting.length === 0) return ready;
  return { ...ready, message: `${ready.message ?? ''}; ${waiting.map((e) => retryLine(e.status, e.snapshot)).join('; ')}` };
}

/** spec.retryAfter as the snapshot keeps it; undefined when the hook sets none. Throws a message on a bad value. */
export function retryLimitsFromSpec(
  spec: { maxDelay?: string; maxRetries?: number } | undefined,
  seconds: (field: string, text: string) => number,
): RetryLimits | undefined {
  if (spec === undefined) return undefined;
  const maxDelaySeconds = spec.maxDelay === undefined ? DEFAULT_RETRY_MAX_DELAY_SECONDS : seconds('retryAfter.maxDelay', spec.maxDelay);
  if (maxDelaySeconds < 1) throw new Error(`retryAfter.maxDelay must be at least 1s, got "${spec.maxDelay}"`);
  const maxRetries = spec.maxRetries ?? DEFAULT_RETRY_MAX_RETRIES;
  if (!Number.isInteger(maxRetries) || maxRetries < 0)
    throw new Error(`retryAfter.maxRetries must be a whole number ≥ 0, got ${maxRetries}`);
  return { maxDelaySeconds, maxRetries };
}
