// Before a request goes to a team's hook (NamespacedPrestartHook), the gate looks at the Service
// its address names: the CRD and the core keep the address in the team's namespace, but a Service
// of type ExternalName there would lead the gate's request elsewhere (another namespace's Service,
// the apiserver, the metadata address) from the gate's place in the network. The judgment is the
// core's (gate/core/namespaced-hooks.ts targetProblem); this reads the Service (and, for an
// ExternalName one, where Knative's ingress says a Knative Service of that name leads), briefly
// remembered per address.
import type { V1Service } from '@kubernetes/client-node';
import { isNotFound } from '../../api/kube-errors.ts';
import type { HookDelivery } from '../../api/types.ts';
import { type Transport, TransportError, type Transports } from '../../emitter/index.ts';
import { namespaceOfHook, serviceOfAddress, type TargetService, targetProblem } from '../core/index.ts';
import type { KubeClient } from '../kube/kube-client.ts';

/** How long one look at a Service counts: a burst of requests to one hook costs one read. */
const LOOK_MS = 10_000;

type Verdict = { problem: string; retriable: boolean } | undefined;

export function guardNamespacedTargets(
  transports: Transports,
  client: Pick<KubeClient, 'core' | 'custom'>,
  clusterDomain: string,
): Transports {
  const looks = new Map<string, { at: number; verdict: Promise<Verdict> }>();
  const look = (namespace: string, name: string): Promise<Verdict> => {
    const key = `${namespace}/${name}`;
    const known = looks.get(key);
    if (known && Date.now() - known.at < LOOK_MS) return known.verdict;
    const verdict = judge(client, namespace, name);
    looks.set(key, { at: Date.now(), verdict });
    verdict.catch(() => looks.delete(key));
    return verdict;
  };
  const guarded = (inner: Transport): Transport => ({
    kind: inner.kind,
    close: () => inner.close(),
    async send(event, delivery: HookDelivery, hook) {
      const namespace = namespaceOfHook(hook);
      if (namespace === undefined) return inner.send(event, delivery, hook);
      const service = delivery.transport === 'http' && delivery.url ? serviceOfAddress(delivery.url, namespace, clusterDomain) : undefined;
      if (service === undefined) {
        throw new TransportError(`hook ${hook}: its address is not a Service of namespace ${namespace}; nothing was sent`, false);
      }
      let verdict: Verdict;
      try {
        verdict = await look(namespace, service);
      } catch (err) {
        throw new TransportError(`hook ${hook}: could not read Service ${namespace}/${service}: ${(err as Error).message}`, true);
      }
      if (verdict) throw new TransportError(`hook ${hook}: ${verdict.problem}; nothing was sent`, verdict.retriable);
      return inner.send(event, delivery, hook);
    },
  });
  return {
    kinds: transports.kinds,
    forDelivery: (delivery) => guarded(transports.forDelivery(delivery)),
    ready: () => transports.ready(),
    close: () => transports.close(),
  };
}

async function judge(client: Pick<KubeClient, 'core' | 'custom'>, namespace: string, name: string): Promise<Verdict> {
  let service: V1Service | undefined;
  try {
    service = await client.core.readNamespacedService({ namespace, name });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const controller = service?.metadata?.ownerReferences?.find((o) => o.controller);
  const target: TargetService | undefined = service
    ? {
        ...(service.spec?.type ? { type: service.spec.type } : {}),
        ...(service.spec?.externalName ? { externalName: service.spec.externalName } : {}),
        ...(controller ? { controller } : {}),
      }
    : undefined;
  const gateways = target?.type === 'ExternalName' ? await knativeGateways(client, namespace, name) : [];
  return targetProblem(namespace, name, target, gateways);
}

/**
 * The addresses Knative's ingress reports for the Route `name` (its KIngress has the Route's name):
 * where the ExternalName Service Knative keeps for a Knative Service leads. None when there is no
 * such KIngress (no Knative Service of that name, or Knative not installed).
 */
async function knativeGateways(client: Pick<KubeClient, 'custom'>, namespace: string, name: string): Promise<string[]> {
  let ingress: unknown;
  try {
    ingress = await client.custom.getNamespacedCustomObject({
      group: 'networking.internal.knative.dev',
      version: 'v1alpha1',
      plural: 'ingresses',
      namespace,
      name,
    });
  } catch (err) {
    if (isNotFound(err)) return [];
    throw err;
  }
  // Knative's Service leads to the balancer's domainInternal, or its domain when it has none.
  const status = (ingress as { status?: Record<string, { ingress?: { domainInternal?: unknown; domain?: unknown }[] } | undefined> })
    .status;
  return [status?.privateLoadBalancer, status?.publicLoadBalancer]
    .flatMap((lb) => lb?.ingress ?? [])
    .flatMap((i) => [i.domainInternal, i.domain])
    .filter((d): d is string => typeof d === 'string' && d !== '');
}
