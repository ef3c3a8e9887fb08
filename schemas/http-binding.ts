// The HTTP side of the contract shared by the senders and the receivers: which statuses may be
// retried, what counts as a CloudEvent on the wire, and header and error helpers. Pure.

/** Statuses after which the same request may succeed later (as Knative's dispatcher retries). */
export function isRetriableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** Any application/cloudevents media type (structured or batch mode; which one is for the parser to say). */
export function isStructuredContentType(contentType: string | undefined): boolean {
  return contentType?.trim().toLowerCase().startsWith('application/cloudevents') ?? false;
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

/** Headers as fetch, node's http, NATS-translated messages or SDKs hand them over. */
export type HeaderSource = Headers | Readonly<Record<string, string | readonly string[] | number | undefined>>;

/**
 * Each header once, as [lowercase name, value]: repeated values joined with ", " as HTTP folds
 * them, numbers (from SDKs that put Integer attributes in headers as is) as strings. Two
 * spellings of one name stay two entries, for the caller to judge.
 */
export function headerEntries(headers: HeaderSource): Array<[string, string]> {
  const raw: Iterable<[string, string | readonly string[] | number | undefined]> =
    headers instanceof Headers ? headers.entries() : Object.entries(headers);
  const out: Array<[string, string]> = [];
  for (const [name, value] of raw) {
    if (value === undefined) continue;
    out.push([name.toLowerCase(), Array.isArray(value) ? value.join(', ') : String(value)]);
  }
  return out;
}

/** Headers as the single-valued lowercase map a Message holds (of two spellings of a name, the last wins). */
export function flattenHeaders(headers: HeaderSource): Record<string, string> {
  return Object.fromEntries(headerEntries(headers));
}
