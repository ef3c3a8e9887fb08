// One delivery to the hook under test, timed, with whatever came back.

import type { Message } from '../../schemas/event.ts';
import { describeNetworkError, lowercaseHeaders } from '../../schemas/http-binding.ts';

export interface Answer {
  probe: string;
  /** What was delivered, for the report ("the valid request", "a repeat"...). */
  what: string;
  sentAt: number;
  ms: number;
  /** Absent when no HTTP answer came (network error, timeout). */
  status?: number;
  headers: Record<string, string>;
  body: Uint8Array;
  error?: string;
}

export async function deliver(url: string, message: Message, probe: string, what: string, timeoutMs: number): Promise<Answer> {
  const sentAt = Date.now();
  const base = { probe, what, sentAt, headers: {}, body: new Uint8Array(0) };
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { ...message.headers, 'user-agent': 'knative-prestart-conformance' },
      body: typeof message.body === 'string' ? message.body : new Uint8Array(message.body),
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    return { ...base, ms: Date.now() - sentAt, status: response.status, headers: lowercaseHeaders(response.headers), body };
  } catch (err) {
    const error = (err as { name?: string })?.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : describeNetworkError(err);
    return { ...base, ms: Date.now() - sentAt, error };
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
