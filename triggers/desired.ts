// The Triggers that Broker-transport hooks need, computed from the hooks alone (no I/O), so the
// gate's reconciler and the `triggers` printer produce the very same objects.
//
// For every hook with `delivery.transport: broker`:
//   - a request Trigger in the Broker's namespace that passes only this hook's requests
//     (`type` + the `prestarthook` extension) to the hook's subscriber, owned by the hook;
//   - the gate's reply Trigger on that Broker, passing `revision.prestart.completed` events to the
//     gate's sink: one per Broker, owned by every hook that uses the Broker, so the garbage
//     collector removes it with the last of them.
import type { HookDelivery, PrestartHook } from '../api/types.ts';
import { API_VERSION } from '../api/types.ts';
import { replyTriggerName, requestTriggerName } from './names.ts';

export const TRIGGER_API_VERSION = 'eventing.knative.dev/v1';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'knative-prestart';
/** `requests` or `replies`: which of the two kinds of Trigger an object is. */
export const ROLE_LABEL = 'prestart.dev/trigger';
/** On request Triggers: the hook whose requests it delivers. */
export const HOOK_LABEL = 'prestart.dev/hook';
/**
 * The label Eventing's webhook defaults on every Trigger, and the MT Broker's reconciler lists a
 * Broker's Triggers by (to reconcile them again when the Broker changes). Set by the gate too, so
 * its Triggers are whole also where that webhook does not run or runs later.
 */
export const BROKER_LABEL = 'eventing.knative.dev/broker';

export const REQUESTED_TYPE = 'revision.prestart.requested';
export const COMPLETED_TYPE = 'revision.prestart.completed';

/**
 * A Knative Destination (duckv1.Destination): a reference, a URI, or a URI relative to the
 * reference; `audience` (the gate's sink, when sender identity is on) is what Eventing's broker
 * filter mints the Trigger's OIDC token for when it delivers there.
 */
export type Destination = NonNullable<HookDelivery['broker']>['subscriber'] & { audience?: string };

/** A hook as read from the cluster; the uid makes it an owner of its Triggers (absent when read from a file). */
export interface OwnedHook extends PrestartHook {
  uid?: string;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export interface TriggerFilter {
  exact: Record<string, string>;
}

export interface DeliverySpec {
  retry: number;
  backoffPolicy: 'exponential' | 'linear';
  backoffDelay: string;
}

export interface TriggerObject {
  apiVersion: typeof TRIGGER_API_VERSION;
  kind: 'Trigger';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
  spec: {
    broker: string;
    filters: TriggerFilter[];
    subscriber: Destination;
    delivery: DeliverySpec;
  };
}

/**
 * Retries of a request by the Broker. A hook that is a Knative Service scaled to zero answers
 * 503 or times out while it cold-starts, and the Broker retries 5xx, 404, 408, 409 and 429:
 * with exponential backoff from 1 s, 5 retries wait 2+4+8+16+32 s, about a minute, which rides
 * out a cold start without a dead-letter sink. More would only duplicate the gate's own
 * resends (every `resendInterval`, same CloudEvent id, until the hook's timeout), which take
 * over after that; hooks dedupe by id either way. A 4xx other than those is not retried.
 */
export const REQUEST_DELIVERY: DeliverySpec = { retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT1S' };

/**
 * Retries of a reply to the gate. The sink answers 5xx while the apiserver is unavailable or a
 * write conflicts, and during a rollout of the gate connections are refused for a moment; a
 * reply lost after that costs a whole resend round trip through the hook, so retry the same.
 * Refusals (forged or stale replies) are 4xx and not retried.
 */
export const REPLY_DELIVERY: DeliverySpec = { retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT1S' };

/**
 * The gate's sink as the reply Triggers' subscriber in an in-cluster install: the Service of
 * config/500-gate.yaml, port 80, path /. A URI and not a `ref`: the reply Trigger lives in the
 * Broker's namespace, and Knative's webhook refuses a subscriber ref to another namespace
 * ("mismatched namespaces", knative.dev/pkg KReference.Validate).
 */
export function inClusterGateSubscriber(namespace = 'knative-prestart', service = 'knative-prestart-gate'): Destination {
  return { uri: `http://${service}.${namespace}.svc/` };
}

function ownerOf(hook: OwnedHook): OwnerReference[] {
  return hook.uid ? [{ apiVersion: API_VERSION, kind: 'PrestartHook', name: hook.name, uid: hook.uid }] : [];
}

/** A copy without undefined members, in a fixed key order, so equal destinations serialise equally. */
function cleanDestination(d: Destination): Destination {
  const out: Destination = {};
  if (d.ref) {
    out.ref = { apiVersion: d.ref.apiVersion, kind: d.ref.kind, name: d.ref.name };
    if (d.ref.namespace) out.ref.namespace = d.ref.namespace;
  }
  if (d.uri) out.uri = d.uri;
  if (d.audience) out.audience = d.audience;
  return out;
}

function trigger(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  owners: OwnerReference[],
  spec: TriggerObject['spec'],
): TriggerObject {
  return {
    apiVersion: TRIGGER_API_VERSION,
    kind: 'Trigger',
    metadata: {
      name,
      namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, ...labels },
      ...(owners.length > 0 ? { ownerReferences: owners } : {}),
    },
    spec,
  };
}

const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/**
 * Every Trigger the given hooks need, sorted by namespace then name. Hooks of other transports,
 * or without a `delivery.broker` (the CRD forbids that), need none.
 */
export function desiredTriggers(hooks: readonly OwnedHook[], gateSubscriber: Destination): TriggerObject[] {
  if (!gateSubscriber.ref && !gateSubscriber.uri) throw new Error("the gate's subscriber needs a ref or a uri");
  const gate = cleanDestination(gateSubscriber);
  const out: TriggerObject[] = [];
  const brokers = new Map<string, { namespace: string; name: string; hooks: OwnedHook[] }>();

  for (const hook of [...hooks].sort(byName)) {
    const broker = hook.spec.delivery.transport === 'broker' ? hook.spec.delivery.broker : undefined;
    if (!broker) continue;
    out.push(
      trigger(
        requestTriggerName(hook.name),
        broker.namespace,
        { [ROLE_LABEL]: 'requests', [HOOK_LABEL]: hook.name, [BROKER_LABEL]: broker.name },
        ownerOf(hook),
        {
          broker: broker.name,
          filters: [{ exact: { type: REQUESTED_TYPE, prestarthook: hook.name } }],
          subscriber: cleanDestination(broker.subscriber),
          delivery: { ...REQUEST_DELIVERY },
        },
      ),
    );
    const key = `${broker.namespace}/${broker.name}`;
    const entry = brokers.get(key) ?? { namespace: broker.namespace, name: broker.name, hooks: [] };
    entry.hooks.push(hook);
    brokers.set(key, entry);
  }

  for (const broker of brokers.values()) {
    out.push(
      trigger(
        replyTriggerName(broker.name),
        broker.namespace,
        { [ROLE_LABEL]: 'replies', [BROKER_LABEL]: broker.name },
        broker.hooks.flatMap(ownerOf),
        {
          broker: broker.name,
          filters: [{ exact: { type: COMPLETED_TYPE } }],
          subscriber: { ...gate, ...(gate.ref ? { ref: { ...gate.ref } } : {}) },
          delivery: { ...REPLY_DELIVERY },
        },
      ),
    );
  }

  return out.sort((a, b) => compareKeys(a, b));
}

function compareKeys(a: TriggerObject, b: TriggerObject): number {
  const ka = `${a.metadata.namespace}/${a.metadata.name}`;
  const kb = `${b.metadata.namespace}/${b.metadata.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
