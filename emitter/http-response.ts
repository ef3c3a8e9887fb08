// What an HTTP answer from a hook (or a Broker ingress) means for the gate. Pure, so the rules
// that decide between "done", "try again" and "give up" are tested without a network.
import { isStructuredContentType } from './nats-binding.ts';

export type HttpVerdict = { type: 'accepted' } | { type: 'replied' } | { type: 'retry'; reason: string } | { type: 'fail'; reason: string };

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

/**
 * A hook's answer to a direct HTTP request. 2xx with a CloudEvent is the completed event itself;
 * 2xx without a body is "working on it". A 200/201 body that is not a CloudEvent is a broken hook:
 * Knative's broker-filter answers 502 for the same thing, so the hook would misbehave behind a
 * Broker too; it is reported instead of being taken as accepted. 202 keeps its meaning
 * (accepted) whatever informational body comes with it.
 */
export function classifyHookResponse(status: number, headers: Record<string, string>, bodyLength: number, excerpt: string): HttpVerdict {
  if (status >= 200 && status < 300) {
    if (bodyLength > 0 && carriesCloudEvent(headers)) return { type: 'replied' };
    if (bodyLength === 0 || status === 202 || status === 204) return { type: 'accepted' };
    const contentType = headers['content-type'] ?? 'no content-type';
    return {
      type: 'fail',
      reason: `hook answered ${status} with a body that is not a CloudEvent (${contentType}): ${excerpt}; answer 202 with an empty body, or 200 with a revision.prestart.completed CloudEvent`,
    };
  }
  return classifyErrorStatus(status, excerpt, 'hook');
}

/** Any non-2xx answer: retriable or permanent, with the status and a short excerpt of the body. */
export function classifyErrorStatus(status: number, excerpt: string, peer: string): HttpVerdict {
  const detail = excerpt.length > 0 ? `${peer} answered ${status}: ${excerpt}` : `${peer} answered ${status}`;
  if (isRetriableStatus(status)) return { type: 'retry', reason: detail };
  if (status >= 300 && status < 400) return { type: 'fail', reason: `${detail} (redirects are not followed)` };
  return { type: 'fail', reason: detail };
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
