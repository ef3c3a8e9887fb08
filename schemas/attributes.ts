// CloudEvents attribute vocabulary shared by the gate, the sinks and hook-side code.
// Extension names follow the CloudEvents rule (lowercase a-z0-9 only) so that they survive
// every binding and can be used in Knative Trigger filters.

export const SPEC_VERSION = '1.0';

/** The gate asks a hook to run (data.action="start") or to stop (data.action="cancel"). */
export const REQUESTED_TYPE = 'revision.prestart.requested';
/** A hook answers: data.outcome is "succeeded", "failed", "retry" (ask again after a delay) or (non-final) "progress". */
export const COMPLETED_TYPE = 'revision.prestart.completed';

/** Name of the PrestartHook a request is for (on requests and replies; Trigger filters use it). */
export const EXT_HOOK = 'prestarthook';
/** Opaque token minted by the gate on every request; see correlation.ts. */
export const EXT_CORRELATION_ID = 'correlationid';
/** On a reply: the request's correlationid, echoed unchanged. */
export const EXT_REPLY_ID = 'replyid';
/** The attempt number of the request (an Integer attribute; "2" in binary mode). */
export const EXT_ATTEMPT = 'prestartattempt';
/** W3C trace context, carried as the CloudEvents distributed-tracing extension. */
export const EXT_TRACEPARENT = 'traceparent';

/**
 * The `dataschema` attribute of a version 2 request: the $id of requested.data.schema.json. A
 * request without `dataschema` comes from a version 1 gate (no revision.containers). The marker is
 * on the event rather than in data so a Trigger can filter on it and a hook can tell the version
 * before it reads the body.
 */
export const REQUESTED_DATASCHEMA_V2 = 'https://prestart.dev/schemas/v1alpha1/requested.data.v2.schema.json';
/** The schema's $id in version 1; no gate sent it, but a request that names it is read as version 1. */
export const REQUESTED_DATASCHEMA_V1 = 'https://prestart.dev/schemas/v1alpha1/requested.data.schema.json';
/** Versions of revision.prestart.requested data this code knows: 1 (no containers) and 2. */
export type RequestedVersion = 1 | 2;

export const JSON_CONTENT_TYPE = 'application/json';
export const STRUCTURED_CONTENT_TYPE = 'application/cloudevents+json';
export const BATCH_CONTENT_TYPE = 'application/cloudevents-batch+json';

/** Default size bound for a completed reply (a 4 KiB message plus a few contributions fit easily). */
export const DEFAULT_MAX_REPLY_BYTES = 64 * 1024;
/** Default size bound for a request: it carries the Revision's labels and annotations (256 KiB max in Kubernetes). */
export const DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024;

/** The source the gate uses when none is configured. */
export function gateSource(namespace: string): string {
  return `/apis/prestart.dev/v1alpha1/namespaces/${namespace}/gate`;
}

/** CloudEvents identity of one event (unique per source+id), used for dedupe and logs. */
export function eventKey(event: { source: string; id: string }): string {
  return `${event.source}#${event.id}`;
}

/** Subject of every request and reply: the Revision it is about. */
export function revisionSubject(namespace: string, revision: string): string {
  return `${namespace}/${revision}`;
}
