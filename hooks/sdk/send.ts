// POSTs a completed event (binary mode) to the gate's sink or a Broker, retrying what may work
// later (network errors, 5xx, 408, 409, 429) with bounded exponential backoff. A 4xx is the
// gate saying no for good (a stale attempt, a refused reply): retrying would only repeat it.
import { setTimeout as sleep } from 'node:timers/promises';
import { type BackoffPolicy, nextRetryDelay } from '../../api/retry.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { bodyExcerpt, describeNetworkError, isRetriableStatus } from '../../schemas/http-binding.ts';
import { toBinary } from '../../schemas/index.ts';

export const DEFAULT_SEND_POLICY: BackoffPolicy = { attempts: 6, baseDelayMs: 250, maxDelayMs: 10_000, maxElapsedMs: 60_000 };

export class SendError extends Error {
  override readonly name = 'SendError';
  constructor(
    message: string,
    /** True when the receiver refused the event (4xx) or sending was stopped: no later try will do better. */
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

export interface PostOptions {
  policy?: BackoffPolicy;
  /** Stops waiting and retrying (shutdown). */
  signal?: AbortSignal;
  /** Per try. Default 10 s. */
  timeoutMs?: number;
}

export async function postEvent(url: string, event: CloudEventRecord, opts: PostOptions = {}): Promise<void> {
  const policy = opts.policy ?? DEFAULT_SEND_POLICY;
  const message = toBinary(event);
  const body = typeof message.body === 'string' ? message.body : new Uint8Array(message.body);
  const started = Date.now();
  for (let tries = 1; ; tries++) {
    const signals = [AbortSignal.timeout(opts.timeoutMs ?? 10_000), ...(opts.signal ? [opts.signal] : [])];
    let reason: string;
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: message.headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.any(signals),
      });
      const answer = new Uint8Array(await response.arrayBuffer());
      if (response.status >= 200 && response.status < 300) return;
      reason = `POST ${url} answered ${response.status}${answer.length > 0 ? `: ${bodyExcerpt(answer)}` : ''}`;
      if (!isRetriableStatus(response.status)) throw new SendError(reason, true);
    } catch (err) {
      if (err instanceof SendError) throw err;
      if (opts.signal?.aborted) throw new SendError(`POST ${url} stopped: ${String(opts.signal.reason)}`, true);
      reason = `POST ${url}: ${describeNetworkError(err)}`;
    }
    const delay = nextRetryDelay(tries, Date.now() - started, policy);
    if (delay === undefined) throw new SendError(`${reason} (gave up after ${tries} ${tries === 1 ? 'try' : 'tries'})`, false);
    try {
      await sleep(delay, undefined, opts.signal ? { signal: opts.signal } : {});
    } catch {
      throw new SendError(`POST ${url} stopped: ${String(opts.signal?.reason)}`, true);
    }
  }
}
