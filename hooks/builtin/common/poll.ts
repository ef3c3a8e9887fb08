// Waiting on the cluster without a watch (the hooks' identities get `get` only): look, then look
// again after a pause that grows, until something is there, the time is up or the run is aborted.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { errorLine, isTransient } from './kube.ts';

export interface PollOptions {
  signal: AbortSignal;
  /** Stop looking then: pollUntil resolves undefined. */
  until: Date;
  /** First pause; default 250 ms. */
  minMs?: number;
  /** Longest pause; default 5 s. */
  maxMs?: number;
  logger?: Logger;
}

/**
 * Calls `look` until it returns something other than undefined and returns that, or undefined
 * once `until` passes. Transient API errors count as "not yet"; other errors reject. Rejects with
 * the signal's reason when the run is aborted (cancel, deadline, shutdown).
 */
export async function pollUntil<T>(look: () => Promise<T | undefined>, opts: PollOptions): Promise<T | undefined> {
  let pause = opts.minMs ?? 250;
  const max = Math.max(pause, opts.maxMs ?? 5000);
  for (;;) {
    opts.signal.throwIfAborted();
    try {
      const value = await look();
      if (value !== undefined) return value;
    } catch (err) {
      if (!isTransient(err)) throw err;
      opts.logger?.warn({ err: errorLine(err) }, 'transient API error; looking again');
    }
    const left = opts.until.getTime() - Date.now();
    if (left <= 0) return undefined;
    await pauseFor(Math.min(pause, left), opts.signal);
    pause = Math.min(max, pause * 2);
  }
}

/** Retries `call` on transient errors, a few times, for reads that must not fail on one blip. */
export async function withRetries<T>(call: () => Promise<T>, signal: AbortSignal, tries = 4): Promise<T> {
  for (let i = 1; ; i++) {
    signal.throwIfAborted();
    try {
      return await call();
    } catch (err) {
      if (i >= tries || !isTransient(err)) throw err;
      await pauseFor(250 * 2 ** (i - 1), signal);
    }
  }
}

async function pauseFor(ms: number, signal: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal });
  } catch {
    // The AbortError of timers hides the reason; callers look at signal.reason.
    signal.throwIfAborted();
  }
}
