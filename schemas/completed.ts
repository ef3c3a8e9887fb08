// revision.prestart.completed: built by hooks (and tests), read by every sink of the gate.
import { randomUUID } from 'node:crypto';
import type { Contribution, Reply } from '../api/types.ts';
import {
  COMPLETED_TYPE,
  DEFAULT_MAX_REPLY_BYTES,
  EXT_ATTEMPT,
  EXT_CORRELATION_ID,
  EXT_HOOK,
  EXT_REPLY_ID,
  EXT_TRACEPARENT,
  eventKey,
  JSON_CONTENT_TYPE,
  SPEC_VERSION,
} from './attributes.ts';
import type { ContractError, ReceivedMessage } from './codec.ts';
import { contractError, integerAttribute, jsonData, parseMessage } from './codec.ts';
import type { KeyRing } from './correlation.ts';
import type { CloudEventRecord } from './event.ts';
import type { CompletedData, Outcome } from './validate.ts';
import { checkCompletedData } from './validate.ts';

/** The parts of a request a reply needs; a ParsedRequest is one. */
export interface RequestHandle {
  correlationid: string;
  hook: string;
  attempt: number;
  subject?: string;
}

export interface BuildCompletedInput {
  /** The request being answered: the event itself, or its handle. */
  request: CloudEventRecord | RequestHandle;
  outcome: Outcome;
  message?: string;
  /** Where a person finds more: a URL or a command (one line). */
  details?: string;
  progress?: number;
  /** outcome retry: seconds until the gate should ask again. */
  retryAfter?: number;
  contributions?: Contribution[];
  /** The hook's own source URI. */
  source: string;
  /** Defaults to a fresh UUID; give a stable one to make a resent reply a recognisable duplicate. */
  id?: string;
  time?: Date;
  traceparent?: string;
}

/** A reply to `request`. Throws when the data would not satisfy the schema. */
export function buildCompleted(input: BuildCompletedInput): CloudEventRecord {
  const handle = requestHandle(input.request);
  const data: CompletedData = { outcome: input.outcome };
  if (input.message !== undefined) data.message = input.message;
  if (input.details !== undefined) data.details = input.details;
  if (input.progress !== undefined) data.progress = input.progress;
  if (input.retryAfter !== undefined) data.retryAfter = input.retryAfter;
  if (input.contributions !== undefined) data.contributions = input.contributions;
  const check = checkCompletedData(data);
  if (!check.ok) throw new Error(`buildCompleted: ${check.reason}`);

  const event: CloudEventRecord = {
    specversion: SPEC_VERSION,
    id: input.id ?? randomUUID(),
    source: input.source,
    type: COMPLETED_TYPE,
    time: (input.time ?? new Date()).toISOString(),
    datacontenttype: JSON_CONTENT_TYPE,
    [EXT_REPLY_ID]: handle.correlationid,
    [EXT_HOOK]: handle.hook,
    [EXT_ATTEMPT]: handle.attempt,
    data,
  };
  if (handle.subject !== undefined) event.subject = handle.subject;
  if (input.traceparent !== undefined) event[EXT_TRACEPARENT] = input.traceparent;
  return event;
}

function requestHandle(request: CloudEventRecord | RequestHandle): RequestHandle {
  if (!('specversion' in request)) return request;
  const correlationid = request[EXT_CORRELATION_ID];
  const hook = request[EXT_HOOK];
  const attempt = integerAttribute(request[EXT_ATTEMPT]);
  if (typeof correlationid !== 'string' || typeof hook !== 'string' || attempt === undefined) {
    throw new Error(`buildCompleted: the request lacks ${EXT_CORRELATION_ID}, ${EXT_HOOK} or ${EXT_ATTEMPT}`);
  }
  return { correlationid, hook, attempt, ...(request.subject === undefined ? {} : { subject: request.subject }) };
}

export interface ParseCompletedOptions {
  keys: KeyRing;
  /** Defaults to DEFAULT_MAX_REPLY_BYTES. */
  maxBytes?: number;
}

export type CompletedResult = { ok: true; reply: Reply; event: CloudEventRecord } | { ok: false; error: ContractError };

/**
 * Everything a sink does with an incoming message before the state sees it: decode, check the
 * type, verify `replyid`, validate the data. The Reply's identity (run, hook, attempt) comes
 * only from the verified replyid, never from attributes a sender could set freely.
 */
export function parseCompleted(message: ReceivedMessage, options: ParseCompletedOptions): CompletedResult {
  const parsed = parseMessage(message, { maxBytes: options.maxBytes ?? DEFAULT_MAX_REPLY_BYTES });
  if (!parsed.ok) return parsed;
  const { event } = parsed;
  if (event.type !== COMPLETED_TYPE) {
    return fail(contractError('wrong-type', `type is "${event.type}", expected "${COMPLETED_TYPE}"`));
  }
  const replyid = event[EXT_REPLY_ID];
  if (replyid === undefined) {
    return fail(contractError('bad-replyid', `missing ${EXT_REPLY_ID} extension: echo the request's ${EXT_CORRELATION_ID}`, 400));
  }
  const ref = options.keys.verify(replyid);
  if (!ref) {
    return fail(contractError('bad-replyid', `${EXT_REPLY_ID} is not a correlation id issued by this gate`));
  }
  const hook = event[EXT_HOOK];
  if (hook !== undefined && hook !== ref.hook) {
    return fail(contractError('hook-mismatch', `${EXT_HOOK} "${String(hook)}" differs from hook "${ref.hook}" of the ${EXT_REPLY_ID}`));
  }
  const attempt = event[EXT_ATTEMPT];
  if (attempt !== undefined && integerAttribute(attempt) !== ref.attempt) {
    return fail(
      contractError('hook-mismatch', `${EXT_ATTEMPT} ${String(attempt)} differs from attempt ${ref.attempt} of the ${EXT_REPLY_ID}`),
    );
  }
  const body = jsonData(event);
  if (!body.ok) return fail(body.error);
  const check = checkCompletedData(body.data);
  if (!check.ok) return fail(contractError('invalid-data', check.reason));
  const data = check.data;

  const reply: Reply = {
    namespace: ref.namespace,
    revision: ref.revision,
    revisionUID: ref.revisionUID,
    runUID: ref.runUID,
    hook: ref.hook,
    attempt: ref.attempt,
    outcome: data.outcome,
    eventKey: eventKey(event),
  };
  if (data.message !== undefined) reply.message = data.message;
  if (data.details !== undefined) reply.details = data.details;
  if (data.progress !== undefined) reply.progress = data.progress;
  if (data.retryAfter !== undefined) reply.retryAfter = data.retryAfter;
  if (data.contributions !== undefined) reply.contributions = data.contributions;
  if (typeof event[EXT_TRACEPARENT] === 'string') reply.traceparent = event[EXT_TRACEPARENT];
  return { ok: true, reply, event };
}

function fail(error: ContractError): CompletedResult {
  return { ok: false, error };
}
