// advanceRun's deadlines step (decide/advance.ts): a Requested hook's deadline, heartbeat and resends
// (and, for one that answered `retry`, asking again: retry-after.ts).
//
// A resend is not written to the run. The request was recorded when its stage started
// (requestedAt, lastSentAt, deadline); asking again for the same attempt adds nothing a crash
// could lose, since hooks are idempotent (protocol rule 1) and a new leader asks every hook still
// Requested once as its term begins. So the leader remembers its own sends (SendClock.sent, this
// term's, per hook and attempt) and a resend costs no write: 1,000 Revisions on a silent hook
// cost the apiserver nothing every resendInterval, and a restart re-sends without 1,000 writes.
// The status's lastSentAt moves only when the status is written for another reason anyway (an
// outage's extended deadline).
import type { HookSnapshot, HookStatus } from '../../api/types.ts';
import type { SendClock } from './first-stage.ts';
import { heartbeatDue, heartbeatExpired } from './heartbeat.ts';
import { isWaitingToRetry, retryOrWait, retryWakeup, timedOutWaiting } from './retry-after.ts';
import { type HookEntry, timeoutMessage } from './status.ts';
import type { Action } from './types.ts';

/** Grace after an outage when resends are off: long enough for a delayed reply (Broker retry, NATS backlog) to land. */
export const OUTAGE_GRACE_MS = 30_000;

/** The key of SendClock.sent: one hook's attempt. */
export function sendKey(hook: string, attempt: number): string {
  return `${hook}#${attempt}`;
}

export function expireOrResend(entry: HookEntry, c: SendClock, sends: Action[]): HookEntry {
  const { status, snapshot } = entry;
  if (status.phase !== 'Requested' || !snapshot) return entry;
  const { now, nowIso } = c;
  const request = (deadline: string): Action => ({
    type: 'sendRequest',
    runUID: c.runUID,
    hook: snapshot,
    attempt: status.attempt,
    deadline,
  });
  const deadline = deadlineOf(status, snapshot, now);
  const grace = outageGraceMs(snapshot);
  // The hook answered `retry`: nothing to re-send until the gate asks again (retry-after.ts).
  if (isWaitingToRetry(status)) return retryOrWait(entry, c, deadline, grace, sends);
  const last = lastSentAt(status, c);
  if (c.leaderSince !== undefined && last < c.leaderSince && deadline < c.leaderSince + grace) {
    // The deadline came, or nearly, while no leader acted: it moves, and that is written.
    const extended = new Date(Math.max(deadline, now + grace)).toISOString();
    if (snapshot.resendIntervalSeconds <= 0) return { snapshot, status: { ...status, deadline: extended } };
    sends.push(request(extended));
    return { snapshot, status: { ...status, lastSentAt: nowIso, deadline: extended } };
  }
  const timedOut = expired(entry, now);
  if (timedOut) return timedOut;
  const deadlineIso = deadlineIsoOf(status, deadline);
  const resendAt = resendAtOf(status, snapshot, c);
  // Sent before this replica led: the leader that recorded it may have died before its send went
  // out (sends are queued after the record), and nothing it held in memory survives. Ask once now.
  const inherited = c.leaderSince !== undefined && last < c.leaderSince;
  if (resendAt !== undefined && (now >= resendAt || inherited)) sends.push(request(deadlineIso));
  return status.deadline === deadlineIso ? entry : { snapshot, status: { ...status, deadline: deadlineIso } };
}

/** The entry as TimedOut when it is Requested and its deadline has passed; undefined otherwise. */
export function expired(entry: HookEntry, now: number): HookEntry | undefined {
  const { status, snapshot } = entry;
  if (status.phase !== 'Requested' || !snapshot) return undefined;
  const deadline = deadlineOf(status, snapshot, now);
  const waiting = isWaitingToRetry(status);
  // --- a hook silent longer than its heartbeatTimeout times out before its deadline (one waiting to be asked again is not silent) ---
  if (now < deadline) return waiting ? undefined : heartbeatExpired(entry, now);
  if (waiting) return timedOutWaiting(entry, deadlineIsoOf(status, deadline));
  return {
    snapshot,
    status: { ...status, phase: 'TimedOut', deadline: deadlineIsoOf(status, deadline), message: timeoutMessage(snapshot) },
  };
}

/** Milliseconds to the nearest deadline, resend or heartbeat of a Requested hook; undefined when none. */
export function nextWakeup(entries: readonly HookEntry[], c: Pick<SendClock, 'now' | 'sent'>): number | undefined {
  let next = Number.POSITIVE_INFINITY;
  for (const { status, snapshot } of entries) {
    if (status.phase !== 'Requested' || !snapshot) continue;
    const waiting = retryWakeup(status, deadlineOf(status, snapshot, c.now));
    if (waiting !== undefined) {
      next = Math.min(next, waiting);
      continue;
    }
    next = Math.min(next, deadlineOf(status, snapshot, c.now), resendAtOf(status, snapshot, c) ?? Number.POSITIVE_INFINITY);
    next = Math.min(next, heartbeatDue(status, snapshot) ?? Number.POSITIVE_INFINITY); // heartbeats
  }
  return Number.isFinite(next) ? Math.max(0, Math.ceil(next - c.now)) : undefined;
}

/** The stored deadline as written when it parses, so an unchanged status compares equal. */
function deadlineIsoOf(status: HookStatus, deadline: number): string {
  return status.deadline !== undefined && !Number.isNaN(Date.parse(status.deadline)) ? status.deadline : new Date(deadline).toISOString();
}

/** One resendInterval (the time a resend needs to bring an answer back), never more than the timeout. */
function outageGraceMs(snapshot: HookSnapshot): number {
  const grace = snapshot.resendIntervalSeconds > 0 ? snapshot.resendIntervalSeconds * 1000 : OUTAGE_GRACE_MS;
  return Math.min(grace, snapshot.timeoutSeconds * 1000);
}

/** When the request last went out: this term's last send, else what the status recorded; 0 (long ago) when neither says. */
function lastSentAt(status: HookStatus, c: Pick<SendClock, 'sent'>): number {
  const stored = Date.parse(status.lastSentAt ?? status.requestedAt ?? '');
  const mine = c.sent?.get(sendKey(status.name, status.attempt)) ?? 0;
  return Math.max(Number.isNaN(stored) ? 0 : stored, mine);
}

function deadlineOf(status: HookStatus, snapshot: HookSnapshot, now: number): number {
  const explicit = Date.parse(status.deadline ?? '');
  if (!Number.isNaN(explicit)) return explicit;
  const requested = Date.parse(status.requestedAt ?? '');
  return (Number.isNaN(requested) ? now : requested) + snapshot.timeoutSeconds * 1000;
}

function resendAtOf(status: HookStatus, snapshot: HookSnapshot, c: Pick<SendClock, 'sent'>): number | undefined {
  if (snapshot.resendIntervalSeconds <= 0) return undefined;
  return lastSentAt(status, c) + snapshot.resendIntervalSeconds * 1000;
}
