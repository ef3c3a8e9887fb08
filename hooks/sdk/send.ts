// POSTs a completed event (binary mode) to the gate's sink or a Broker, retrying what may work
// later (network errors, 5xx, 408, 409, 429) with bounded exponential backoff. A 4xx is the
// gate saying no for good (a stale attempt, a refused reply): retrying would only repeat it.

import type { CloudEventRecord } from '../../schemas/event.ts';
import { bodyExcerpt, isRetriableStatus } from '../../schemas/http-binding.ts';
import { toBinary } from '../../schemas/index.ts';
import { PostError, postMessage } from '../../transport/http-client.ts';
import { type BackoffPolicy, RetriesExhausted, retry } from '../../transport/retry.ts';

export const DEFAULT_SEND_POLICY: BackoffPolicy = { attempts: 6, baseDelayMs: 250, maxDelayMs: 10_000, maxElapsedMs: 60_000 };

// Of a refusal only an excerpt is kept.
const EXCERPT_BYTES = 4096;

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
  /** The bearer token to send (sender identity), asked for on every try so a rotated token is used at once. */
  bearer?: () => Promise<string | undefined>;
}

export async function postEvent(url: string, event: CloudEventRecord, opts: PostOptions = {}): Promise<void> {
  const message = toBinary(event);
  const post = { timeoutMs: opts.timeoutMs ?? 10_000, maxBytes: EXCERPT_BYTES, overflow: 'truncate', signal: opts.signal } as const;
  const once = async (): Promise<void> => {
    let status: number;
    let body: Uint8Array;
    let sent = message;
    if (opts.bearer) {
      // A token that cannot be read now may be there at the next try (the kubelet writes it).
      const token = await opts.bearer().catch((err: unknown) => {
        throw new SendError(`POST ${url}: ${(err as Error).message}`, false);
      });
      if (token !== undefined) sent = { ...message, headers: { ...message.headers, authorization: `Bearer ${token}` } };
    }
    try {
      ({ status, body } = await postMessage(url, sent, post));
    } catch (err) {
      throw err instanceof PostError ? new SendError(`POST ${url}: ${err.message}`, false) : err;
    }
    if (status >= 200 && status < 300) return;
    throw new SendError(`POST ${url} answered ${status}${body.length > 0 ? `: ${bodyExcerpt(body)}` : ''}`, !isRetriableStatus(status));
  };
  try {
    await retry(once, opts.policy ?? DEFAULT_SEND_POLICY, {
      signal: opts.signal,
      retriable: (err) => !(err instanceof SendError && err.permanent),
    });
  } catch (err) {
    if (opts.signal?.aborted) throw new SendError(`POST ${url} stopped: ${String(opts.signal.reason)}`, true);
    if (err instanceof RetriesExhausted) throw new SendError(err.message, false);
    throw err;
  }
}
