// Requests and replies as the gate and a hook really build them (schemas' builders, a real key),
// for the fixtures' Revision and hook unless a test says otherwise.
import { randomUUID } from 'node:crypto';
import type { ContainerImage, ContributionKind, Reply } from '../../api/types.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { buildCompleted, buildRequested, type KeyRing, type ParsedRequest, parseRequested, toBinary } from '../../schemas/index.ts';
import type { ReplyDisposition } from '../../sinks/types.ts';
import { hook, revision } from './fixtures.ts';
import { keys } from './keys.ts';

export interface RequestOptions {
  hook?: string;
  revision?: string;
  /** Default: a fresh one, so every call is a request of a Revision of its own. */
  uid?: string;
  /** The PrestartRun's UID. Default: a fresh one. */
  runUID?: string;
  attempt?: number;
  deadline?: Date;
  params?: Record<string, unknown>;
  allowed?: ContributionKind[];
  replyTo?: string;
  /** Default: keys.ts's `keys`; `foreignKeys` for ids that must not verify. */
  ring?: KeyRing;
  /** What the run recorded (protocol version 2). Default: the fixture Revision's one container, resolved. */
  containers?: ContainerImage[];
}

/** The fixture Revision's container as the gate records it: its image resolved to the fixture digest. */
export const containers: ContainerImage[] = [
  { name: 'user-container', image: 'registry.example/shop/checkout:v2', digest: revision.images[0] as string },
];

/** A revision.prestart.requested start, as the gate sends it. */
export function requestEvent(opts: RequestOptions = {}): CloudEventRecord {
  return buildRequested({
    revision: { ...revision, name: opts.revision ?? revision.name, uid: opts.uid ?? randomUUID() },
    hook: {
      name: opts.hook ?? hook.name,
      params: opts.params ?? hook.params,
      allowedContributions: opts.allowed ?? hook.allowedContributions,
    },
    runUID: opts.runUID ?? randomUUID(),
    attempt: opts.attempt ?? 1,
    deadline: opts.deadline ?? new Date(Date.now() + 60_000),
    action: 'start',
    containers: opts.containers ?? containers,
    ...(opts.replyTo ? { replyTo: opts.replyTo } : {}),
    keys: opts.ring ?? keys,
  });
}

/** The cancel the gate sends for `start`'s attempt. */
export function cancelEvent(start: CloudEventRecord, reason = `Revision shop/${revision.name} was deleted`): CloudEventRecord {
  const data = start.data as { revision: { namespace: string; name: string; uid: string }; hook: { name: string }; attempt: number };
  const ref = keys.verify(start.correlationid);
  if (!ref) throw new Error('cancelEvent: the start was not minted with the test keys');
  return buildRequested({
    revision: { ...data.revision, labels: {}, annotations: {}, images: [] },
    hook: { name: data.hook.name, params: {}, allowedContributions: [] },
    runUID: ref.runUID,
    attempt: data.attempt,
    action: 'cancel',
    reason,
    keys,
  });
}

/** A request as a hook reads it. */
export function parsed(event: CloudEventRecord): ParsedRequest {
  const result = parseRequested(toBinary(event));
  if (!result.ok) throw new Error(`test request does not parse: ${result.error.reason}`);
  return result.request;
}

/** A hook's revision.prestart.completed answer to `request`. */
export function completedEvent(
  request: CloudEventRecord = requestEvent(),
  opts: { outcome?: 'succeeded' | 'failed' | 'progress'; id?: string; message?: string } = {},
): CloudEventRecord {
  return buildCompleted({
    request,
    outcome: opts.outcome ?? 'succeeded',
    message: opts.message ?? 'migrated',
    source: 'https://hooks.example/db-migrate',
    ...(opts.id === undefined ? {} : { id: opts.id }),
  });
}

/** An onReply that records what reached the gate and answers with `answer`. */
export function recordingOnReply(answer: (reply: Reply) => Promise<ReplyDisposition> | ReplyDisposition = () => ({ type: 'applied' })) {
  const seen: Reply[] = [];
  const onReply = async (reply: Reply): Promise<ReplyDisposition> => {
    seen.push(reply);
    return answer(reply);
  };
  return { seen, onReply };
}
