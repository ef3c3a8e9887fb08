// Answers and replies as the checker records them, for judging without a hook.

import type { Contribution } from '../../../../api/types.ts';
import type { Answer } from '../../../../hooks/conformance/post.ts';
import { type ReceivedReply, readReply } from '../../../../hooks/conformance/reply-sink.ts';
import type { CloudEventRecord } from '../../../../schemas/event.ts';
import { buildCompleted, toBinary } from '../../../../schemas/index.ts';
import { keys } from '../../../support/keys.ts';

export function answer(status: number | undefined, over: Partial<Answer> = {}): Answer {
  return {
    probe: 'valid',
    what: 'the valid request (binary mode)',
    sentAt: 1_000,
    ms: 20,
    headers: {},
    body: new Uint8Array(0),
    ...(status === undefined ? { error: 'ECONNREFUSED' } : { status }),
    ...over,
  };
}

export function jsonAnswer(status: number, body: unknown, over: Partial<Answer> = {}): Answer {
  return answer(status, { headers: { 'content-type': 'application/json' }, body: new TextEncoder().encode(JSON.stringify(body)), ...over });
}

export function reply(
  request: CloudEventRecord,
  outcome: 'succeeded' | 'failed' | 'progress',
  opts: {
    id?: string;
    message?: string;
    at?: number;
    contributions?: Contribution[];
    via?: 'sink' | 'answer';
    correlationid?: string;
  } = {},
): ReceivedReply {
  const handle = opts.correlationid
    ? {
        correlationid: opts.correlationid,
        hook: String(request.prestarthook),
        attempt: 1,
        ...(request.subject ? { subject: request.subject } : {}),
      }
    : request;
  const event = buildCompleted({
    request: handle,
    outcome,
    source: '/hook',
    ...(opts.id ? { id: opts.id } : {}),
    ...(opts.message ? { message: opts.message } : {}),
    ...(opts.contributions ? { contributions: opts.contributions } : {}),
  });
  return readReply(toBinary(event), keys, opts.via ?? 'sink', opts.at ?? 2_000);
}
