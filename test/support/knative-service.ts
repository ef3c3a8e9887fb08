// What a user checks of a Knative Service on the real node: that it is Ready, and what its pod
// answers through Knative's activator (no networking layer runs there: the request carries the
// Revision in the headers an ingress would add).

import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';

export type ServiceStatus = {
  status?: { conditions?: { type: string; status: string; message?: string }[]; latestReadyRevisionName?: string };
};

/** Waits until Knative Service `namespace/name` is Ready; resolves to it. */
export function knativeServiceReady(kc: KubeConfig, namespace: string, name: string, timeoutMs: number): Promise<ServiceStatus> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  return waitFor(
    async () => {
      const s = (await custom.getNamespacedCustomObject({
        group: 'serving.knative.dev',
        version: 'v1',
        namespace,
        plural: 'services',
        name,
      })) as ServiceStatus;
      const r = s.status?.conditions?.find((c) => c.type === 'Ready');
      if (r?.status === 'True') return s;
      throw new Error(`Ready ${r?.status ?? 'absent'}: ${r?.message ?? ''}`);
    },
    { what: `Knative Service ${namespace}/${name} Ready`, timeoutMs, intervalMs: 250 },
  );
}

/** GET `path` through the activator's Service for Revision `namespace/revision`, as an ingress sends it. */
export async function throughActivator(kc: KubeConfig, namespace: string, revision: string, path: string): Promise<Response> {
  const res = await kubeRequest(kc, 'GET', '/api/v1/namespaces/knative-serving/services/activator-service');
  const ip = (res.body as { spec?: { clusterIP?: string } }).spec?.clusterIP;
  return fetch(`http://${ip}:80${path}`, {
    headers: { 'Knative-Serving-Revision': revision, 'Knative-Serving-Namespace': namespace },
    signal: AbortSignal.timeout(60_000),
  });
}

/** A Knative Service of one container, as a user writes it. */
export async function createKnativeService(kc: KubeConfig, namespace: string, name: string, image: string): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    namespace,
    plural: 'services',
    body: {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Service',
      metadata: { name },
      spec: { template: { spec: { containers: [{ image }] } } },
    },
  });
}

export interface RunObject {
  metadata: { name: string };
  status?: { phase?: string; hooks?: { name: string; phase: string; requestedAt?: string; message?: string }[] };
}

/** The PrestartRuns of `namespace`, as `kubectl get prestartruns -n` lists them. */
export async function prestartRuns(kc: KubeConfig, namespace: string): Promise<RunObject[]> {
  const list = (await kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: 'prestart.dev',
    version: 'v1alpha1',
    namespace,
    plural: 'prestartruns',
  })) as { items: RunObject[] };
  return list.items;
}
