// Requests and replies as the gate and a hook really build them (schemas' builders, a real key).

import type { Reply } from '../../api/types.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { buildCompleted, buildRequested, KeyRing } from '../../schemas/index.ts';
import type { ReplyDisposition } from '../../sinks/types.ts';

export const keys = new KeyRing([KeyRing.generateKey()]);
/** Another gate's key: its ids look right but must not verify here. */
export const foreignKeys = new KeyRing([KeyRing.generateKey()]);

export function requestEvent(opts: { hook?: string; attempt?: number; revision?: string; ring?: KeyRing } = {}): CloudEventRecord {
  const hook = opts.hook ?? 'db-migrate';
  const revision = opts.revision ?? 'web-00002';
  return buildRequested({
    revision: {
      namespace: 'shop',
      name: revision,
      uid: `uid-${revision}`,
      service: 'web',
      configuration: 'web',
      labels: { app: 'web' },
      annotations: {},
      images: ['registry.example/web@sha256:0123'],
    },
    hook: { name: hook, params: { target: 'orders' }, allowedContributions: ['env'] },
    attempt: opts.attempt ?? 1,
    deadline: new Date(Date.now() + 60_000),
    action: 'start',
    source: '/apis/prestart.dev/v1alpha1/namespaces/shop/gate',
    keys: opts.ring ?? keys,
  });
}

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
