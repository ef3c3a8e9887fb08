// revision.prestart.requested: built by the gate (start and cancel), read by hooks.

import type { ContainerImage, HookSnapshot, RevisionView } from '../api/types.ts';
import {
  DEFAULT_MAX_REQUEST_BYTES,
  EXT_ATTEMPT,
  EXT_CORRELATION_ID,
  EXT_HOOK,
  EXT_TRACEPARENT,
  eventKey,
  gateSource,
  JSON_CONTENT_TYPE,
  REQUESTED_DATASCHEMA_V1,
  REQUESTED_DATASCHEMA_V2,
  REQUESTED_TYPE,
  type RequestedVersion,
  revisionSubject,
  SPEC_VERSION,
} from './attributes.ts';
import type { ContractError, ReceivedMessage } from './codec.ts';
import { contractError, integerAttribute, jsonData, parseMessage } from './codec.ts';
import type { KeyRing, RequestAction } from './correlation.ts';
import { MAX_CORRELATION_ID_LENGTH, requestId } from './correlation.ts';
import type { CloudEventRecord } from './event.ts';
import type { RequestedData } from './validate.ts';
import { checkRequestedData } from './validate.ts';

export interface BuildRequestedInput {
  revision: Pick<RevisionView, 'namespace' | 'name' | 'uid' | 'service' | 'configuration' | 'labels' | 'annotations' | 'images'>;
  hook: Pick<HookSnapshot, 'name' | 'params' | 'allowedContributions'>;
  /**
   * What will run: every container with the digest Knative resolved, as recorded on the
   * PrestartRun before the first request (PrestartRunSpec.containers). Required for
   * action=start; a cancel carries it when given. Not taken from `revision` on purpose: the
   * request must name what the run recorded, not what the Revision says at the moment of sending.
   */
  containers?: readonly ContainerImage[];
  /** metadata.uid of the PrestartRun the request belongs to: it scopes the event id and the correlationid to that run. */
  runUID: string | undefined;
  attempt: number;
  /** When the attempt times out; required for action=start. */
  deadline?: string | Date;
  action: RequestAction;
  /** Required for action=cancel. */
  reason?: string;
  /** Where an asynchronous reply should go, when the transport has no reply path of its own. */
  replyTo?: string;
  /** The gate's source URI; defaults to gateSource(revision.namespace). */
  source?: string;
  keys: KeyRing;
  traceparent?: string;
  /** The event's time; defaults to now. */
  time?: Date;
}

/**
 * The request (or cancel) for one hook and attempt. Throws when the result would not satisfy
 * the schema: that is a bug in the caller, not something to send.
 */
export function buildRequested(input: BuildRequestedInput): CloudEventRecord {
  const { revision, hook, attempt, action } = input;
  const deadline = input.deadline instanceof Date ? input.deadline.toISOString() : input.deadline;
  if (action === 'start' && input.containers === undefined) {
    throw new Error(
      'buildRequested: action "start" needs containers (protocol version 2: the Revision\'s containers with the digests Knative resolved, PrestartRunSpec.containers)',
    );
  }
  const containers = input.containers?.map(requestedContainer);
  // Members in schema order, so the JSON reads top-down the way the schema documents it.
  const data: RequestedData = {
    action,
    ...(input.reason === undefined ? {} : { reason: input.reason }),
    revision: {
      namespace: revision.namespace,
      name: revision.name,
      uid: revision.uid,
      ...(revision.service === undefined ? {} : { service: revision.service }),
      ...(revision.configuration === undefined ? {} : { configuration: revision.configuration }),
      labels: { ...revision.labels },
      annotations: { ...revision.annotations },
      // Version 1 hooks read only images: give them what will run, digests where Knative resolved them.
      images: containers ? containers.filter((c) => !c.init).map(referenceToRun) : [...revision.images],
      ...(containers === undefined ? {} : { containers }),
    },
    hook: { name: hook.name, params: hook.params ?? {} },
    attempt,
    ...(deadline === undefined ? {} : { deadline }),
    ...(input.replyTo === undefined ? {} : { replyTo: input.replyTo }),
    contributions: { allowed: [...hook.allowedContributions] },
  };
  const check = checkRequestedData(data);
  if (!check.ok) throw new Error(`buildRequested: ${check.reason}`);

  const event: CloudEventRecord = {
    specversion: SPEC_VERSION,
    id: requestId(input.runUID ?? revision.uid, hook.name, attempt, action),
    source: input.source ?? gateSource(revision.namespace),
    type: REQUESTED_TYPE,
    subject: revisionSubject(revision.namespace, revision.name),
    time: (input.time ?? new Date()).toISOString(),
    datacontenttype: JSON_CONTENT_TYPE,
    dataschema: REQUESTED_DATASCHEMA_V2,
    [EXT_HOOK]: hook.name,
    [EXT_CORRELATION_ID]: input.keys.mint({
      namespace: revision.namespace,
      revision: revision.name,
      revisionUID: revision.uid,
      ...(input.runUID === undefined ? {} : { runUID: input.runUID }),
      hook: hook.name,
      attempt,
    }),
    [EXT_ATTEMPT]: attempt,
    data,
  };
  if (input.traceparent !== undefined) event[EXT_TRACEPARENT] = input.traceparent;
  return event;
}

/** One container as the request carries it: only the members the schema knows, `init` only when true. */
function requestedContainer(c: ContainerImage): ContainerImage {
  return {
    name: c.name,
    image: c.image,
    ...(c.digest === undefined || c.digest === '' ? {} : { digest: c.digest }),
    ...(c.init ? { init: true } : {}),
  };
}

/** What Knative runs for a container: the digest it resolved, else the image as written. */
export function referenceToRun(c: Pick<ContainerImage, 'image' | 'digest'>): string {
  return c.digest || c.image;
}

/**
 * The data version an event declares: its `dataschema`. None (a version 1 gate never set it) or
 * version 1's $id is 1; version 2's $id, and any other value, is 2: a newer gate's schema is
 * checked with the newest rules this code knows, and unknown members pass.
 */
export function requestedVersion(event: Pick<CloudEventRecord, 'dataschema'>): RequestedVersion {
  const schema = event.dataschema;
  return schema === undefined || schema === REQUESTED_DATASCHEMA_V1 ? 1 : 2;
}

/** A validated request as a hook sees it. */
export interface ParsedRequest {
  event: CloudEventRecord;
  /** 1: from a gate older than revision.containers (data.revision.containers absent); 2: containers in every start. */
  version: RequestedVersion;
  data: RequestedData;
  /** Echo this as `replyid` on every reply. */
  correlationid: string;
  hook: string;
  attempt: number;
  subject?: string;
  /** source#id: the same request delivered twice has the same key. */
  key: string;
}

export type RequestedResult = { ok: true; request: ParsedRequest } | { ok: false; error: ContractError };

/** Reads and validates a request (hook side). Hooks cannot verify the correlationid: only the gate holds the key. */
export function parseRequested(message: ReceivedMessage, options: { maxBytes?: number } = {}): RequestedResult {
  const parsed = parseMessage(message, { maxBytes: options.maxBytes ?? DEFAULT_MAX_REQUEST_BYTES });
  if (!parsed.ok) return parsed;
  const { event } = parsed;
  if (event.type !== REQUESTED_TYPE) {
    return fail(contractError('wrong-type', `type is "${event.type}", expected "${REQUESTED_TYPE}"`));
  }
  const correlationid = event[EXT_CORRELATION_ID];
  if (typeof correlationid !== 'string' || correlationid.length === 0 || correlationid.length > MAX_CORRELATION_ID_LENGTH) {
    return fail(contractError('malformed', `missing or oversized ${EXT_CORRELATION_ID} extension: a reply could not be correlated`));
  }
  const body = jsonData(event);
  if (!body.ok) return fail(body.error);
  const version = requestedVersion(event);
  const check = checkRequestedData(body.data, version);
  if (!check.ok) return fail(contractError('invalid-data', check.reason));
  const data = check.data;
  const hook = event[EXT_HOOK];
  if (hook !== undefined && hook !== data.hook.name) {
    return fail(contractError('hook-mismatch', `${EXT_HOOK} "${String(hook)}" differs from data.hook.name "${data.hook.name}"`));
  }
  const attempt = event[EXT_ATTEMPT];
  if (attempt !== undefined && integerAttribute(attempt) !== data.attempt) {
    return fail(contractError('hook-mismatch', `${EXT_ATTEMPT} ${String(attempt)} differs from data.attempt ${data.attempt}`));
  }
  return {
    ok: true,
    request: {
      event,
      version,
      data,
      correlationid,
      hook: data.hook.name,
      attempt: data.attempt,
      ...(event.subject === undefined ? {} : { subject: event.subject }),
      key: eventKey(event),
    },
  };
}

function fail(error: ContractError): RequestedResult {
  return { ok: false, error };
}
