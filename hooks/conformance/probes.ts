// The requests the checker sends. Every probe is about its own made-up Revision
// (conformance/<probe>-00001, fresh UID), so any reply, even one the gate would refuse, can be
// traced back to the probe that caused it through its replyid or its subject.
import { randomUUID } from 'node:crypto';
import { HOLD_LABEL, HOOKS_ANNOTATION } from '../../api/types.ts';
import type { CloudEventRecord, Message } from '../../schemas/event.ts';
import { buildRequested, gateSource, type KeyRing, toBinary } from '../../schemas/index.ts';
import type { RequestedRevision } from '../../schemas/validate.ts';
import type { ReceivedReply } from './reply-sink.ts';

export const PROBE_NAMESPACE = 'conformance';
const REVISION_SUFFIX = '-00001';
const IMAGE = `registry.example/conformance/app@sha256:${'0123456789abcdef'.repeat(4)}`;
/** What every probe says will run (protocol version 2): the app resolved, a sidecar Knative does not resolve. */
const CONTAINERS = [
  { name: 'user-container', image: 'registry.example/conformance/app:v1', digest: IMAGE },
  { name: 'sidecar', image: 'kind.local/conformance/sidecar:dev' },
];

export interface ProbeContext {
  keys: KeyRing;
  hook: string;
  replyTo: string;
  params: Record<string, unknown>;
  /** How long the probes' deadlines are ahead. */
  deadlineMs: number;
}

export function startRequest(ctx: ProbeContext, probe: string, hook = ctx.hook): CloudEventRecord {
  const name = `${probe}${REVISION_SUFFIX}`;
  return buildRequested({
    revision: {
      namespace: PROBE_NAMESPACE,
      name,
      uid: randomUUID(),
      service: probe,
      configuration: probe,
      labels: { 'serving.knative.dev/service': probe, 'serving.knative.dev/configuration': probe, [HOLD_LABEL]: 'true' },
      annotations: { [HOOKS_ANNOTATION]: JSON.stringify([hook]) },
      images: [IMAGE],
    },
    hook: { name: hook, params: ctx.params, allowedContributions: ['env', 'envFrom', 'volume'] },
    runUID: randomUUID(),
    attempt: 1,
    deadline: new Date(Date.now() + ctx.deadlineMs),
    action: 'start',
    containers: CONTAINERS,
    replyTo: ctx.replyTo,
    source: gateSource(PROBE_NAMESPACE),
    keys: ctx.keys,
  });
}

/**
 * The next attempt of `start`, as the gate asks again after a retry reply: the same Revision, run
 * and deadline; a new attempt, so a new id and correlationid.
 */
export function nextAttemptOf(ctx: ProbeContext, start: CloudEventRecord, attempt: number): CloudEventRecord {
  const data = start.data as {
    revision: RequestedRevision;
    hook: { name: string; params: Record<string, unknown> };
    deadline: string;
  };
  const ref = ctx.keys.verify(start.correlationid);
  if (!ref) throw new Error('nextAttemptOf: the start carries no correlationid of this key ring');
  return buildRequested({
    revision: data.revision,
    hook: { name: data.hook.name, params: data.hook.params, allowedContributions: ['env', 'envFrom', 'volume'] },
    runUID: ref.runUID,
    attempt,
    deadline: new Date(data.deadline),
    action: 'start',
    containers: CONTAINERS,
    replyTo: ctx.replyTo,
    source: start.source,
    keys: ctx.keys,
  });
}

/**
 * A valid start as a newer gate might send it: the same version 2 request with members this
 * version does not define, at the top of data, in revision and in a container (R9).
 */
export function newerRequest(ctx: ProbeContext, probe: string): CloudEventRecord {
  const event = startRequest(ctx, probe);
  const data = structuredClone(event.data) as { revision: { containers: Record<string, unknown>[] } & Record<string, unknown> };
  const [first, ...rest] = data.revision.containers;
  return {
    ...event,
    data: {
      ...data,
      revision: { ...data.revision, generation: 2, containers: [{ ...first, platform: 'linux/amd64' }, ...rest] },
      priority: { class: 'interactive', note: 'a member a newer gate added' },
    },
  };
}

/** The cancel of `start`: same Revision, run, hook, attempt and correlationid, its own id. */
export function cancelOf(ctx: ProbeContext, start: CloudEventRecord, reason: string): CloudEventRecord {
  const data = start.data as {
    revision: { namespace: string; name: string; uid: string };
    hook: { name: string; params: Record<string, unknown> };
  };
  const ref = ctx.keys.verify(start.correlationid);
  if (!ref) throw new Error('cancelOf: the start carries no correlationid of this key ring');
  return buildRequested({
    revision: { ...data.revision, labels: {}, annotations: {}, images: [IMAGE] },
    hook: { name: data.hook.name, params: data.hook.params, allowedContributions: ['env', 'envFrom', 'volume'] },
    runUID: ref.runUID,
    attempt: 1,
    action: 'cancel',
    reason,
    replyTo: ctx.replyTo,
    source: start.source,
    keys: ctx.keys,
  });
}

export interface MalformedProbe {
  probe: string;
  /** What is wrong with it, for the report. */
  what: string;
  message: Message;
}

/** Requests no hook may act on; each would be a valid request but for one thing. */
export function malformedProbes(ctx: ProbeContext): MalformedProbe[] {
  const binary = (probe: string) => toBinary(startRequest(ctx, probe));
  const without = (m: Message, header: string): Message => {
    const headers = { ...m.headers };
    delete headers[header];
    return { headers, body: m.body };
  };
  const withHeader = (m: Message, header: string, value: string): Message => ({ headers: { ...m.headers, [header]: value }, body: m.body });
  const noDeadline = binary('malformed-invalid-data');
  const data = JSON.parse(String(noDeadline.body)) as Record<string, unknown>;
  delete data.deadline;
  return [
    {
      probe: 'malformed-not-a-cloudevent',
      what: 'JSON that is not a CloudEvent',
      message: { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ hook: ctx.hook, action: 'start' }) },
    },
    { probe: 'malformed-missing-id', what: 'a request without ce-id', message: without(binary('malformed-missing-id'), 'ce-id') },
    {
      probe: 'malformed-wrong-specversion',
      what: 'a request with specversion 0.3',
      message: withHeader(binary('malformed-wrong-specversion'), 'ce-specversion', '0.3'),
    },
    {
      probe: 'malformed-wrong-type',
      what: 'an event of type revision.prestart.completed',
      message: withHeader(binary('malformed-wrong-type'), 'ce-type', 'revision.prestart.completed'),
    },
    {
      probe: 'malformed-invalid-data',
      what: 'a start without data.deadline',
      message: { headers: noDeadline.headers, body: JSON.stringify(data) },
    },
  ];
}

/** The probe a reply answers: from its verified replyid, else from its subject. */
export function probeOf(r: ReceivedReply): string | undefined {
  const name = r.reply?.namespace === PROBE_NAMESPACE ? r.reply.revision : subjectName(r.event?.subject);
  return name?.endsWith(REVISION_SUFFIX) ? name.slice(0, -REVISION_SUFFIX.length) : undefined;
}

function subjectName(subject: string | undefined): string | undefined {
  const prefix = `${PROBE_NAMESPACE}/`;
  return subject?.startsWith(prefix) ? subject.slice(prefix.length) : undefined;
}
