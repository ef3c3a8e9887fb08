// Who Knative Eventing delivers a Broker hook's replies as: the OIDC ServiceAccount of the gate's
// reply Trigger on the hook's Broker, read from the Trigger's status.auth.serviceAccountName
// (Eventing's Trigger reconciler creates that ServiceAccount and writes the name once
// `authentication-oidc` is enabled; its broker filter then sends with a token of it). The sink's
// identity check (sinks/token-review.ts) asks this for replies that carry a token.
//
// Only a Trigger the gate manages, on the hook's Broker, counts: a Trigger of the same name made by
// someone else is never trusted. A known identity is kept for a while (one GET per Trigger per
// `ttlMs`); an unknown one (no Trigger yet, no status.auth yet) is asked again at the next reply,
// so a reply the Broker retries is taken as soon as Eventing has written the status.
import { ApiException, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { HookDelivery } from '../api/types.ts';
import type { ReplyTriggerIdentity } from '../sinks/identity.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './desired.ts';
import { replyTriggerName } from './names.ts';

export interface ReplyTriggerLookupOptions {
  /** The hook's delivery as the gate knows it now (its hooks cache). */
  deliveryOf: (hook: string) => HookDelivery | undefined;
  /** How long a known identity is reused. Default 30 s. */
  ttlMs?: number;
  now?: () => number;
}

interface LiveTrigger {
  metadata?: { labels?: Record<string, string> };
  spec?: { broker?: string };
  status?: { auth?: { serviceAccountName?: string } };
}

/** The OIDC ServiceAccount Eventing gave a Trigger, when the gate manages it on `broker`. Pure. */
export function triggerServiceAccount(live: LiveTrigger | undefined, broker: string): string | undefined {
  if (!live) return undefined;
  if (live.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) return undefined;
  if (live.spec?.broker !== broker) return undefined;
  return live.status?.auth?.serviceAccountName || undefined;
}

/**
 * The reply Trigger identity of a hook, or undefined for a hook that does not use a Broker.
 * Rejects when the apiserver cannot answer now (the sink then answers 503 and the Broker retries).
 */
export function replyTriggerLookup(
  kc: KubeConfig,
  opts: ReplyTriggerLookupOptions,
): (hook: string) => Promise<ReplyTriggerIdentity | undefined> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const ttlMs = opts.ttlMs ?? 30_000;
  const now = opts.now ?? Date.now;
  const known = new Map<string, { identity: ReplyTriggerIdentity; until: number }>();
  const inFlight = new Map<string, Promise<ReplyTriggerIdentity>>();

  async function read(namespace: string, broker: string): Promise<ReplyTriggerIdentity> {
    const name = replyTriggerName(broker);
    let live: LiveTrigger | undefined;
    try {
      live = (await api.getNamespacedCustomObject({
        group: 'eventing.knative.dev',
        version: 'v1',
        plural: 'triggers',
        namespace,
        name,
      })) as LiveTrigger;
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
    }
    const serviceAccount = triggerServiceAccount(live, broker);
    return { namespace, name, ...(serviceAccount ? { serviceAccount } : {}) };
  }

  return async (hook) => {
    const delivery = opts.deliveryOf(hook);
    const broker = delivery?.transport === 'broker' ? delivery.broker : undefined;
    if (!broker) return undefined;
    const key = `${broker.namespace}/${broker.name}`;
    const hit = known.get(key);
    if (hit && hit.until > now()) return hit.identity;
    let pending = inFlight.get(key);
    if (!pending) {
      pending = read(broker.namespace, broker.name).finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    const identity = await pending;
    if (identity.serviceAccount) known.set(key, { identity, until: now() + ttlMs });
    else known.delete(key);
    return identity;
  };
}
