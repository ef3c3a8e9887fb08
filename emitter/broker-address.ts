// Where a Broker takes events: its ingress URL from `status.address.url`, and the audience its
// ingress checks OIDC tokens for (`status.address.audience`, set by Knative Eventing when
// `authentication-oidc` is enabled), looked up through the Kubernetes API and kept for a while,
// so a burst of requests to one Broker costs one lookup.
//
// A Broker's status is not proof of anything: Eventing's aggregated `edit` role lets a namespace
// editor write `brokers/status`, and a Broker of a class nobody reconciles keeps what was written.
// The gate sends there the request (with its replyid) and, when an audience is announced, a token
// of its own ServiceAccount for that audience. So an address counts only when Eventing could have
// written it (`addressOf`): the Broker is Ready for its current generation, under a class a known
// Eventing data plane reconciles, and its audience, if any, is the one Eventing gives that Broker
// (`eventing.knative.dev/broker/<namespace>/<name>`): a token for it is good at that Broker's
// ingress only, never at the apiserver or another Broker.
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
 * Reads the Broker and takes its address as `addressOf` allows (`extraClasses` trusted besides
 * KNOWN_BROKER_CLASSES). The Kubernetes client is loaded on first use so that gates without
 * Broker hooks never pay for it.
 */
export function kubeBrokerResolver(
  loadConfig?: () => Promise<import('@kubernetes/client-node').KubeConfig>,
  extraClasses: readonly string[] = [],
): ResolveBrokerUrl {
  const classes = [...KNOWN_BROKER_CLASSES, ...extraClasses];
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
    return addressOf(broker, namespace, name, classes);
  };
}

/** The class annotation Eventing's webhook defaults on every Broker (config-br-defaults). */
export const BROKER_CLASS_ANNOTATION = 'eventing.knative.dev/broker.class';

/**
 * Broker classes whose controllers write a Broker's status from what they run: Knative Eventing's
 * channel-based Broker, and the Kafka Broker (eventing-kafka-broker). Another class's status may be
 * anyone's who can write it.
 */
export const KNOWN_BROKER_CLASSES: readonly string[] = ['MTChannelBasedBroker', 'Kafka', 'KafkaNamespaced'];

/** The audience Knative Eventing gives a Broker's ingress (knative.dev/eventing pkg/auth: group/kind/namespace/name, lower case). */
export function brokerAudience(namespace: string, name: string): string {
  return `eventing.knative.dev/broker/${namespace}/${name}`.toLowerCase();
}

/** What the gate reads of a Broker. */
export interface BrokerObject {
  metadata?: { generation?: number; annotations?: Record<string, string> };
  status?: {
    observedGeneration?: number;
    conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
    address?: { url?: string; audience?: string };
    addresses?: { url?: string; audience?: string }[];
  };
}

/**
 * The address to send to, or why there is none (retriable: the Broker may become Ready, or its
 * status be corrected by its controller). Pure.
 */
export function addressOf(
  broker: BrokerObject,
  namespace: string,
  name: string,
  classes: readonly string[] = KNOWN_BROKER_CLASSES,
): BrokerAddress {
  const ref = `Broker ${namespace}/${name}`;
  const brokerClass = broker.metadata?.annotations?.[BROKER_CLASS_ANNOTATION];
  if (brokerClass === undefined || !classes.includes(brokerClass)) {
    throw new TransportError(
      `${ref} has class ${brokerClass === undefined ? '(none)' : JSON.stringify(brokerClass)}, which is not one the gate trusts to write its status (${classes.join(', ')}; --broker-class adds one): the gate sends it nothing`,
      true,
    );
  }
  const ready = broker.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'True') {
    const why = ready
      ? `Ready=${ready.status}${ready.reason ? ` (${ready.reason}${ready.message ? `: ${ready.message}` : ''})` : ''}`
      : 'no Ready condition';
    throw new TransportError(`${ref} is not Ready (${why}): the gate sends only to a Ready Broker`, true);
  }
  const generation = broker.metadata?.generation;
  if (generation !== undefined && broker.status?.observedGeneration !== generation) {
    throw new TransportError(
      `${ref}'s status is for generation ${broker.status?.observedGeneration ?? '(none)'}, not its current ${generation}: waiting for Eventing to reconcile it`,
      true,
    );
  }
  const address = broker.status?.address?.url ? broker.status.address : broker.status?.addresses?.find((a) => a.url);
  if (!address?.url) throw new TransportError(`${ref} has no status.address.url yet`, true);
  if (address.audience !== undefined && address.audience !== '') {
    const expected = brokerAudience(namespace, name);
    if (address.audience !== expected) {
      throw new TransportError(
        `${ref} announces the audience ${JSON.stringify(address.audience)}, but Eventing gives it ${JSON.stringify(expected)}: the gate sends it nothing (a token of the gate for another audience may be good elsewhere as the gate)`,
        true,
      );
    }
    return { url: address.url, audience: expected };
  }
  return { url: address.url };
}
