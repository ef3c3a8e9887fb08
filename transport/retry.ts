// Exponential backoff with jitter, bounded by attempts and by total time, and the one retry loop
// built on it. Several gate replicas (and many held Revisions) retrying against one Broker ingress
// must not retry in lockstep.

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

/** What `retry` throws when the policy runs out: the last failure's message, and how many tries there were. */
export class RetriesExhausted extends Error {
  override readonly name = 'RetriesExhausted';
  constructor(
    readonly last: unknown,
    readonly tries: number,
  ) {
    super(`${(last as Error)?.message ?? String(last)} (gave up after ${tries} ${tries === 1 ? 'try' : 'tries'})`, { cause: last });
  }
}

export interface RetryOptions {
  /** Stops retrying: no new try starts and a pause ends at once; `retry` then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** False for a failure no later try can fix: it is thrown as is. Default: every failure is retried. */
  retriable?: (err: unknown) => boolean;
  /** Told before each pause (for a debug log). */
  onRetry?: (err: unknown, delayMs: number, tries: number) => void;
}

/**
 * Runs `attempt` until it resolves, pausing by `policy` between tries. Rejects with a
 * RetriesExhausted once the policy gives up, with the failure itself when `retriable` says no, and
 * with the signal's reason once the signal aborts.
 */
export async function retry<T>(attempt: (tries: number) => Promise<T>, policy: BackoffPolicy, opts: RetryOptions = {}): Promise<T> {
  const { signal } = opts;
  const started = Date.now();
  for (let tries = 1; ; tries++) {
    signal?.throwIfAborted();
    try {
      return await attempt(tries);
    } catch (err) {
      signal?.throwIfAborted();
      if (opts.retriable && !opts.retriable(err)) throw err;
      const delay = nextRetryDelay(tries, Date.now() - started, policy);
      if (delay === undefined) throw new RetriesExhausted(err, tries);
      opts.onRetry?.(err, delay, tries);
      await pause(delay, signal);
    }
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      if (signal?.aborted) reject(signal.reason);
      else resolve();
    }
  });
}
