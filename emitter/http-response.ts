// What an HTTP answer from a hook (or a Broker ingress) means for the gate. Pure, so the rules
// that decide between "done", "try again" and "give up" are tested without a network.
import { carriesCloudEvent, isRetriableStatus } from '../schemas/http-binding.ts';

export type HttpVerdict = { type: 'accepted' } | { type: 'replied' } | { type: 'retry'; reason: string } | { type: 'fail'; reason: string };

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
