// The HTTP side of the contract shared by the senders and the receivers: which statuses may be
// retried, what counts as a CloudEvent on the wire, and header and error helpers. Pure.
import { isStructuredContentType } from './nats-binding.ts';

/** Statuses after which the same request may succeed later (as Knative's dispatcher retries). */
export function isRetriableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * True when the answer is meant as a CloudEvent (binary: `ce-` core attribute headers;
 * structured: an application/cloudevents media type). Whether it is a valid one is for the
 * schemas' parser to say; a broken one then fails the hook with the parser's reason.
 */
export function carriesCloudEvent(headers: Record<string, string>): boolean {
  if (headers['ce-specversion'] !== undefined || headers['ce-id'] !== undefined || headers['ce-type'] !== undefined) return true;
  return isStructuredContentType(headers['content-type']);
}

/** First bytes of a body as one printable line, for error messages and logs. */
export function bodyExcerpt(body: Uint8Array, max = 200): string {
  const text = Buffer.from(body.subarray(0, max)).toString('utf8');
  // Control characters (newlines, escapes) would break a log line or a status message.
  const oneLine = Array.from(text, (c) => (c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? ' ' : c))
    .join('')
    .replace(/ {2,}/g, ' ')
    .trim();
  return body.length > max ? `${oneLine}…` : oneLine;
}

/** undici reports "fetch failed" and hides the useful part (ECONNREFUSED, ENOTFOUND...) in `cause`. */
export function describeNetworkError(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause;
  if (cause?.code) return `${e.message ?? 'request failed'} (${cause.code}${cause.message ? `: ${cause.message}` : ''})`;
  if (cause?.message) return `${e.message ?? 'request failed'} (${cause.message})`;
  return e?.message ?? String(err);
}

export function lowercaseHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    out[key.toLowerCase()] = value;
  });
  return out;
}

/** Node's incoming headers as the single-valued lowercase map a Message holds. */
export function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[key.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}
