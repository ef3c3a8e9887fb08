// Where a Broker takes events: its ingress URL from `status.address.url`, and the audience its
// ingress checks OIDC tokens for (`status.address.audience`, set by Knative Eventing when
// `authentication-oidc` is enabled), looked up through the Kubernetes API and kept for a while,
// so a burst of requests to one Broker costs one lookup.
import { TransportError } from './transport.ts';

/** A Broker's ingress and, when Eventing's sender identity is on, the audience its tokens must name. */
export interface BrokerAddress {
  url: string;
  audience?: string;
}

/** A bare URL stands for an address without an audience (a Broker with identity off). */
export type ResolveBrokerUrl = (namespace: string, name: string) => Promise<string | BrokerAddress>;

const asAddress = (a: string | BrokerAddress): BrokerAddress => (typeof a === 'string' ? { url: a } : a);

export class AddressCache {
  private readonly entries = new Map<string, { url: Promise<BrokerAddress>; expires: number }>();
  constructor(
    private readonly resolve: ResolveBrokerUrl,
    private readonly ttlMs: number,
  ) {}

  get(namespace: string, name: string): Promise<BrokerAddress> {
    const key = `${namespace}/${name}`;
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && hit.expires > now) return hit.url;
    // Concurrent sends for one Broker share a single lookup.
    const url = this.resolve(namespace, name).then(asAddress);
    this.entries.set(key, { url, expires: now + this.ttlMs });
    url.catch(() => this.entries.delete(key));
    return url;
  }

  forget(namespace: string, name: string): void {
    this.entries.delete(`${namespace}/${name}`);
  }
}

/**
 * Reads the Broker's `status.address` (falling back to the first of `status.addresses` with a
 * URL): its `url` and `audience`. The
 * Kubernetes client is loaded on first use so that gates without Broker hooks never pay for it.
 */
export function kubeBrokerResolver(loadConfig?: () => Promise<import('@kubernetes/client-node').KubeConfig>): ResolveBrokerUrl {
  let api: Promise<import('@kubernetes/client-node').CustomObjectsApi> | undefined;
  const getApi = () => {
    api ??= (async () => {
      const k8s = await import('@kubernetes/client-node');
      let kc: import('@kubernetes/client-node').KubeConfig;
      if (loadConfig) kc = await loadConfig();
      else {
        kc = new k8s.KubeConfig();
        kc.loadFromDefault();
      }
      return kc.makeApiClient(k8s.CustomObjectsApi);
    })();
    return api;
  };
  return async (namespace, name) => {
    let broker: BrokerObject;
    try {
      broker = (await (
        await getApi()
      ).getNamespacedCustomObject({
        group: 'eventing.knative.dev',
        version: 'v1',
        namespace,
        plural: 'brokers',
        name,
      })) as BrokerObject;
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === 404) throw new TransportError(`Broker ${namespace}/${name} does not exist`, true);
      if (code === 403)
        throw new TransportError(`the gate may not read Broker ${namespace}/${name} (RBAC: get brokers.eventing.knative.dev)`, true);
      throw new TransportError(`reading Broker ${namespace}/${name}: ${(err as Error).message}`, true);
    }
    const address = broker.status?.address?.url ? broker.status.address : broker.status?.addresses?.find((a) => a.url);
    if (!address?.url) throw new TransportError(`Broker ${namespace}/${name} has no status.address.url yet (is it Ready?)`, true);
    return { url: address.url, ...(address.audience ? { audience: address.audience } : {}) };
  };
}

interface BrokerObject {
  status?: { address?: { url?: string; audience?: string }; addresses?: { url?: string; audience?: string }[] };
}
