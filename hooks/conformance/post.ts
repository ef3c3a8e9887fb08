// One delivery to the hook under test, timed, with whatever came back.

import { DEFAULT_MAX_REQUEST_BYTES } from '../../schemas/attributes.ts';
import type { Message } from '../../schemas/event.ts';
import { describeNetworkError } from '../../schemas/http-binding.ts';
import { PostError, postMessage } from '../../transport/http-client.ts';

export interface Answer {
  probe: string;
  /** What was delivered, for the report ("the valid request", "a repeat"...). */
  what: string;
  sentAt: number;
  ms: number;
  /** Absent when no HTTP answer came (network error, timeout, an answer past the size bound). */
  status?: number;
  headers: Record<string, string>;
  body: Uint8Array;
  error?: string;
}

// Far more than any reply needs (the gate takes 64 KiB): a larger answer is reported, not judged.
const MAX_ANSWER_BYTES = DEFAULT_MAX_REQUEST_BYTES;

export async function deliver(url: string, message: Message, probe: string, what: string, timeoutMs: number): Promise<Answer> {
  const sentAt = Date.now();
  const base = { probe, what, sentAt, headers: {}, body: new Uint8Array(0) };
  try {
    const answer = await postMessage(url, message, { timeoutMs, maxBytes: MAX_ANSWER_BYTES, userAgent: 'knative-prestart-conformance' });
    return { ...base, ms: Date.now() - sentAt, ...answer };
  } catch (err) {
    if (!(err instanceof PostError)) throw err;
    return { ...base, ms: Date.now() - sentAt, error: err.message };
  }
}

/** Waits until something answers HTTP at `url` (any status), so the checker can start right after the hook. */
export async function reachable(url: string, timeoutMs: number): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
    try {
      const response = await fetch(url, { method: 'GET', signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      return undefined;
    } catch (err) {
      last = describeNetworkError(err);
    }
    if (Date.now() + pause > deadline) return `nothing answers at ${url} (${last})`;
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
