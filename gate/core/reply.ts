// Applying one verified `completed` reply to a run. Deliveries are at-least-once and unordered,
// so a reply may be a duplicate, belong to an older attempt or an older run of the same Revision
// (deleted and created again: attempts start at 1 again, only the run's UID differs), or arrive
// after the run moved on; only a reply for the current run and the hook's current attempt while
// the gate waits for it (Requested) changes anything. A hook still Pending was never asked, so
// no genuine reply for it can exist yet. The run phase, conditions and events are left to
// decide(), which sees the new hook status next.
//
// Also the gate's own replies: what a request that could not be delivered, or a synchronous
// answer that is not a valid reply, does to the hook. The gate and the simulator both ask here.

import type { HookStatus, PrestartRunView, Reply, RevisionView } from '../../api/types.ts';
import { filterContributions } from './contributions.ts';
import { runStatusOf } from './first-stage.ts';
import { applyRetryReply, isWaitingToRetry } from './retry-after.ts';
import { oneLine, summaryOf } from './status.ts';
import type { ReplyResult } from './types.ts';

const MAX_MESSAGE = 1024;
const MAX_DETAILS = 1024;

/** The request a reply answers: one attempt of one hook in one PrestartRun of one Revision. */
export type RequestRef = Pick<Reply, 'namespace' | 'revision' | 'revisionUID' | 'runUID' | 'hook' | 'attempt'>;

export function requestRef(
  revision: Pick<RevisionView, 'namespace' | 'name' | 'uid'>,
  runUID: string | undefined,
  hook: string,
  attempt: number,
): RequestRef {
  const ref = { namespace: revision.namespace, revision: revision.name, revisionUID: revision.uid, hook, attempt };
  return runUID === undefined ? ref : { ...ref, runUID };
}

/** The run UID a run's requests and replies are bound to: none for a run an earlier release created (RUN_IDS_ANNOTATION). */
export function idRunUID(run: Pick<PrestartRunView, 'uid' | 'legacyIds'>): string | undefined {
  return run.legacyIds ? undefined : run.uid;
}

/** The eventKey of every reply the gate makes itself, for logs. */
export const GATE_REPLY_KEY = 'gate/delivery-failure';

/**
 * A start request the transport could not deliver. A permanent refusal (the hook answered 4xx,
 * or its delivery cannot work) fails the hook at once, so the user sees why instead of silence
 * until the timeout; anything retriable returns undefined: the resend rule of decide() sends it
 * again, nothing is lost by waiting.
 */
export function deliveryFailureReply(ref: RequestRef, failure: { retriable: boolean; reason: string }): Reply | undefined {
  if (failure.retriable) return undefined;
  return gateFailure(ref, `the hook could not take the request: ${failure.reason}`);
}

/** A synchronous answer that is not a valid completed event: the hook fails, as a sink would refuse it. */
export function invalidReplyFailure(ref: RequestRef, reason: string): Reply {
  return gateFailure(ref, `the hook answered with an invalid reply: ${reason}`);
}

function gateFailure(ref: RequestRef, message: string): Reply {
  return { ...ref, outcome: 'failed', message, eventKey: GATE_REPLY_KEY };
}

export function applyReply(run: PrestartRunView, reply: Reply, now: Date): ReplyResult {
  const reject = (reason: string): ReplyResult => ({ type: 'rejected', reason, permanent: true });
  if (reply.revisionUID !== run.spec.revisionUID) {
    return reject(`revision UID ${reply.revisionUID} does not match the run's ${run.spec.revisionUID}`);
  }
  if (reply.namespace !== run.namespace || reply.revision !== run.name) {
    return reject(`reply for ${reply.namespace}/${reply.revision} does not belong to run ${run.namespace}/${run.name}`);
  }
  // A v1 reply (no run UID) counts only for a run an earlier release created, whose requests the
  // gate still names the v1 way (RUN_IDS_ANNOTATION); every other run takes only its own replies.
  const bound = run.legacyIds ? reply.runUID === undefined : run.uid !== '' && reply.runUID === run.uid;
  if (!bound) {
    return reject(
      `reply for an earlier PrestartRun ${run.namespace}/${run.name} (uid ${reply.runUID ?? 'none: a v1 id'}, now ${run.uid || 'unknown'}): the run was deleted and started over, only replies to its new requests count`,
    );
  }
  // A run started with its first stage requested may not have its status stored yet: what that start implies counts.
  const status = runStatusOf(run);
  const index = status?.hooks.findIndex((h) => h.name === reply.hook) ?? -1;
  const current = status?.hooks[index];
  const snapshot = run.spec.hooks.find((h) => h.name === reply.hook);
  if (!status || !current || !snapshot) return reject(`unknown hook ${reply.hook}`);
  if (!Number.isInteger(reply.attempt) || reply.attempt < current.attempt) {
    return reject(`stale attempt ${reply.attempt} of hook ${reply.hook} (current attempt ${current.attempt})`);
  }
  if (reply.attempt > current.attempt) {
    return reject(`attempt ${reply.attempt} of hook ${reply.hook} was never requested (current attempt ${current.attempt})`);
  }
  if ((reply.outcome === 'succeeded' && current.phase === 'Succeeded') || (reply.outcome === 'failed' && current.phase === 'Failed')) {
    return { type: 'duplicate' };
  }
  // This attempt already asked to be asked again: a repeat of that answer changes nothing.
  if (reply.outcome === 'retry' && isWaitingToRetry(current)) return { type: 'duplicate' };
  if (current.phase === 'Pending') {
    return reject(`hook ${reply.hook} has not been requested yet (attempt ${current.attempt} is Pending); ${reply.outcome} reply refused`);
  }
  if (current.phase !== 'Requested') {
    return reject(`hook ${reply.hook} is already ${current.phase}; ${reply.outcome} reply ignored`);
  }

  const message = typeof reply.message === 'string' ? oneLine(reply.message, MAX_MESSAGE) : undefined;
  let next: HookStatus;
  if (reply.outcome === 'retry') {
    next = applyRetryReply(current, snapshot, reply, now);
  } else if (reply.outcome === 'progress') {
    next = { ...current };
    if (message !== undefined) next.message = message;
    if (isProgress(reply.progress)) next.progress = reply.progress;
    // The details link (a URL or a command) of the latest reply that gave one.
    const details = detailsOf(reply);
    if (details !== undefined) next.details = details;
    // A hook with a heartbeatTimeout shows it is alive with every progress reply, even an unchanged one.
    if (snapshot.heartbeatTimeoutSeconds) {
      next.lastProgressAt = now.toISOString();
    } else if (next.message === current.message && next.progress === current.progress && next.details === current.details) {
      return { type: 'duplicate' };
    }
  } else {
    next = {
      name: current.name,
      phase: reply.outcome === 'succeeded' ? 'Succeeded' : 'Failed',
      attempt: current.attempt,
      answeredAt: now.toISOString(),
    };
    // The retries before this answer stay on record (kubectl get prestartrun -o yaml shows them).
    for (const key of ['requestedAt', 'lastSentAt', 'deadline', 'retryReason'] as const) {
      if (current[key] !== undefined) next[key] = current[key];
    }
    if (current.retries !== undefined) next.retries = current.retries;
    if (isProgress(reply.progress)) next.progress = reply.progress;
    const details = detailsOf(reply) ?? current.details;
    if (details !== undefined) next.details = details;
    const notes: string[] = message ? [message] : [];
    if (reply.outcome === 'succeeded' && reply.contributions !== undefined) {
      const list: unknown[] = Array.isArray(reply.contributions) ? reply.contributions : [reply.contributions];
      const { kept, dropped } = filterContributions(list, snapshot.allowedContributions);
      if (kept.length > 0) next.contributions = kept;
      if (dropped.length > 0) notes.push(`dropped contributions: ${dropped.join('; ')}`);
    }
    if (notes.length > 0) next.message = oneLine(notes.join('; '), MAX_MESSAGE * 2);
  }

  const hooks = status.hooks.map((h, i) => (i === index ? next : h));
  const type = reply.outcome === 'progress' ? 'progress' : 'applied';
  return { type, status: { ...status, hooks, summary: summaryOf(hooks) } };
}

function isProgress(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 100;
}

/** A reply's details link, one bounded line (it lands in the status, the Revision's condition and Events). */
function detailsOf(reply: Reply): string | undefined {
  return typeof reply.details === 'string' && reply.details.trim() !== '' ? oneLine(reply.details, MAX_DETAILS) : undefined;
}
