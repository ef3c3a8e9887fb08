// Requests as the gate builds them, parsed as a hook parses them.
import { randomUUID } from 'node:crypto';
import type { ContributionKind } from '../../api/types.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { buildRequested, KeyRing, type ParsedRequest, parseRequested, toBinary } from '../../schemas/index.ts';

export const keys = new KeyRing([KeyRing.generateKey()]);

export interface RequestOptions {
  hook?: string;
  uid?: string;
  attempt?: number;
  deadline?: Date;
  params?: Record<string, unknown>;
  allowed?: ContributionKind[];
  replyTo?: string;
}

export function startEvent(opts: RequestOptions = {}): CloudEventRecord {
  const uid = opts.uid ?? randomUUID();
  return buildRequested({
    revision: {
      namespace: 'shop',
      name: 'checkout-00002',
      uid,
      service: 'checkout',
      configuration: 'checkout',
      labels: { 'serving.knative.dev/service': 'checkout' },
      annotations: { 'prestart.dev/hooks': '["db"]' },
      images: ['registry.example/shop/checkout@sha256:0123'],
    },
    hook: {
      name: opts.hook ?? 'db',
      params: opts.params ?? { database: 'orders' },
      allowedContributions: opts.allowed ?? ['env', 'volume'],
    },
    attempt: opts.attempt ?? 1,
    deadline: opts.deadline ?? new Date(Date.now() + 60_000),
    action: 'start',
    ...(opts.replyTo ? { replyTo: opts.replyTo } : {}),
    keys,
  });
}

export function cancelEvent(start: CloudEventRecord, reason = 'Revision shop/checkout-00002 was deleted'): CloudEventRecord {
  const data = start.data as { revision: { namespace: string; name: string; uid: string }; hook: { name: string }; attempt: number };
  return buildRequested({
    revision: { ...data.revision, labels: {}, annotations: {}, images: [] },
    hook: { name: data.hook.name, params: {}, allowedContributions: [] },
    attempt: data.attempt,
    action: 'cancel',
    reason,
    keys,
  });
}

export function parsed(event: CloudEventRecord): ParsedRequest {
  const result = parseRequested(toBinary(event));
  if (!result.ok) throw new Error(`test request does not parse: ${result.error.reason}`);
  return result.request;
}
