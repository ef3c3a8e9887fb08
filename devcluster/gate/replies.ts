// How test hooks answer: synchronously in the HTTP response, or later by POSTing to replyTo.
import type { Contribution } from '../../api/types.ts';
import { buildCompleted, toBinary } from '../../schemas/index.ts';
import type { ReceivedRequest } from './hook-server.ts';

type Outcome = 'succeeded' | 'failed' | 'progress';

export function completedFor(
  req: ReceivedRequest,
  outcome: Outcome,
  extra: { message?: string; progress?: number; contributions?: Contribution[]; id?: string } = {},
) {
  return buildCompleted({
    request: { correlationid: req.correlationid, hook: req.data.hook.name, attempt: req.data.attempt },
    outcome,
    source: `/test-hooks/${req.data.hook.name}`,
    ...extra,
  });
}

/** A 200 answer whose body is the completed event (binary mode). */
export function syncReply(req: ReceivedRequest, outcome: Outcome, extra: Parameters<typeof completedFor>[2] = {}) {
  const msg = toBinary(completedFor(req, outcome, extra));
  return { status: 200, headers: msg.headers, body: typeof msg.body === 'string' ? msg.body : Buffer.from(msg.body).toString('utf8') };
}

/** POSTs a completed event to the request's replyTo, the way an asynchronous hook does. */
export async function asyncReply(
  req: ReceivedRequest,
  outcome: Outcome,
  extra: Parameters<typeof completedFor>[2] = {},
): Promise<Response> {
  if (!req.data.replyTo) throw new Error('request has no replyTo');
  const msg = toBinary(completedFor(req, outcome, extra));
  return fetch(req.data.replyTo, { method: 'POST', headers: msg.headers, body: msg.body });
}
