// STAND-IN for a Knative networking layer's cluster-local routing, on the real node, where no
// networking layer (Kourier, Istio, Contour: all Envoy) runs. knative-client.ts's
// startIngressStandIn marks Ingresses Ready for status only, with an internal load balancer name
// that resolves nowhere; this one marks them Ready with a name that leads somewhere: the public
// Service of the one Revision the Ingress sends all its traffic to (the split's serviceName), so
// `<ksvc>.<ns>.svc.cluster.local` (the ExternalName Service Knative's route reconciler makes from
// that name) resolves through CoreDNS to that Revision's ClusterIP, and a pod (a Broker's filter
// delivering to a Trigger subscriber that is a Knative Service) reaches it. What a real layer does
// and this does not: traffic splits, tags, the Knative-Serving-* headers the activator needs. So
// the Revision must be served by its pods (its ServerlessService in Serve mode: min-scale >= 1 and
// `autoscaling.knative.dev/target-burst-capacity: "0"`, or the activator, reached without those
// headers, answers 404), and the Ingress is marked Ready only once it is; an Ingress with more
// than one split is left not Ready.
import type { KubeConfig } from '@kubernetes/client-node';
import { condition, type IngressObject, type KnativeObject, runIngressStandIn } from './knative-client.ts';

interface RoutedIngress extends IngressObject {
  spec?: {
    rules?: {
      visibility?: string;
      http?: { paths?: { splits?: { serviceName: string; serviceNamespace: string; percent?: number }[] }[] };
    }[];
  };
}

/** The Revision (its public Service) that all of the Ingress's traffic goes to, or undefined. */
export function soleRevision(ing: RoutedIngress): { name: string; namespace: string } | undefined {
  const splits = (ing.spec?.rules ?? []).flatMap((r) => (r.http?.paths ?? []).flatMap((p) => p.splits ?? []));
  const targets = new Set(splits.map((s) => `${s.serviceNamespace}/${s.serviceName}`));
  if (targets.size !== 1 || splits.some((s) => (s.percent ?? 100) !== 100)) return undefined;
  const [namespace, name] = ([...targets][0] as string).split('/') as [string, string];
  return { name, namespace };
}

type Sks = KnativeObject & { spec?: { mode?: string } };

export function startIngressRouteStandIn(kc: KubeConfig, namespaces: string[]): { stop(): void } {
  return runIngressStandIn<RoutedIngress>(kc, namespaces, async (ing, api) => {
    const target = soleRevision(ing);
    if (!target) return undefined;
    // Only once the Revision's pods serve its public Service (its ServerlessService in Serve
    // mode): until then that Service leads to the activator, and a client's kept-alive
    // connection would stay there, answered 404 for want of the headers.
    const sks = (await api.getNamespacedCustomObject({
      group: 'networking.internal.knative.dev',
      version: 'v1alpha1',
      namespace: target.namespace,
      plural: 'serverlessservices',
      name: target.name,
    })) as Sks;
    if (sks.spec?.mode !== 'Serve' || condition(sks, 'Ready')?.status !== 'True') return undefined;
    return `${target.name}.${target.namespace}.svc.cluster.local`;
  });
}
