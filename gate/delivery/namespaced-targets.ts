// Before a request goes to a team's hook (NamespacedPrestartHook), the gate looks at the Service
// its address names: the CRD and the core keep the address in the team's namespace, but a Service
// of type ExternalName there would lead the gate's request elsewhere (another namespace's Service,
// the apiserver, the metadata address) from the gate's place in the network. The judgment is the
// core's (gate/core/namespaced-hooks.ts targetProblem); this reads the Service (and whether a
// Knative Service of that name exists), briefly remembered per address.
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
    ? { ...(service.spec?.type ? { type: service.spec.type } : {}), ...(controller ? { controller } : {}) }
    : undefined;
  let knativeService = false;
  if (target?.type === 'ExternalName') {
    knativeService = await client.custom
      .getNamespacedCustomObject({ group: 'serving.knative.dev', version: 'v1', plural: 'services', namespace, name })
      .then(
        () => true,
        (err: unknown) => {
          if (isNotFound(err)) return false;
          throw err;
        },
      );
  }
  return targetProblem(namespace, name, target, knativeService);
}
