// Exponential backoff with jitter, bounded by attempts and by total time. Several gate replicas
// (and many held Revisions) retrying against one Broker ingress must not retry in lockstep.

export interface BackoffPolicy {
  /** Tries in all, the first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** No new try starts after this much time since the first one. */
  maxElapsedMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { attempts: 4, baseDelayMs: 200, maxDelayMs: 5_000, maxElapsedMs: 15_000 };

/**
 * Delay before retry number `retry` (1 = the first retry): half of the exponential step is fixed,
 * the other half random, so delays still grow while callers spread out.
 */
export function backoffDelay(retry: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.round(step / 2 + random() * (step / 2));
}

/** The delay before the next try, or undefined when the policy says to give up. */
export function nextRetryDelay(
  triesSoFar: number,
  elapsedMs: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (triesSoFar >= policy.attempts) return undefined;
  const delay = backoffDelay(triesSoFar, policy, random);
  if (elapsedMs + delay > policy.maxElapsedMs) return undefined;
  return delay;
}
