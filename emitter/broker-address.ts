// Where a Broker takes events: its ingress URL from `status.address.url`, looked up through the
// Kubernetes API and kept for a while, so a burst of requests to one Broker costs one lookup.
import { TransportError } from './transport.ts';

export type ResolveBrokerUrl = (namespace: string, name: string) => Promise<string>;

export class AddressCache {
  private readonly entries = new Map<string, { url: Promise<string>; expires: number }>();
  constructor(
    private readonly resolve: ResolveBrokerUrl,
    private readonly ttlMs: number,
  ) {}

  get(namespace: string, name: string): Promise<string> {
    const key = `${namespace}/${name}`;
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && hit.expires > now) return hit.url;
    // Concurrent sends for one Broker share a single lookup.
    const url = this.resolve(namespace, name);
    this.entries.set(key, { url, expires: now + this.ttlMs });
    url.catch(() => this.entries.delete(key));
    return url;
  }

  forget(namespace: string, name: string): void {
    this.entries.delete(`${namespace}/${name}`);
  }
}

/**
 * Reads the Broker's `status.address.url` (falling back to the first of `status.addresses`). The
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
    const url = broker.status?.address?.url ?? broker.status?.addresses?.find((a) => a.url)?.url;
    if (!url) throw new TransportError(`Broker ${namespace}/${name} has no status.address.url yet (is it Ready?)`, true);
    return url;
  };
}

interface BrokerObject {
  status?: { address?: { url?: string }; addresses?: { url?: string }[] };
}
