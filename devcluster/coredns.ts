// The real node's cluster DNS: CoreDNS (a main of ours with only the plugins it needs,
// devcluster/coredns/main.go) as a host process on the bridge address, answering the cluster's
// zone from the apiserver (kubernetes plugin, as user system:coredns) and nothing else: no
// forward plugin is even compiled in, so a name outside cluster.local is REFUSED, never sent on.
// Pods reach it as the Service kube-system/kube-dns (a fixed ClusterIP, an EndpointSlice of ours
// naming the bridge address), through kube-proxy like any Service.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Api, DiscoveryV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { ComponentSpec } from './processes.ts';

export const COREDNS_USER = 'system:coredns';
const MANAGED_BY = 'knative-prestart-devcluster';

export interface CorednsLayout {
  dir: string;
  listenIp: string;
  kubeconfig: string;
  clusterDomain: string;
  healthPort: number;
  readyPort: number;
}

export function corednsSpec(binary: string, l: CorednsLayout): ComponentSpec {
  const corefile = join(l.dir, 'Corefile');
  writeFileSync(
    corefile,
    `${l.clusterDomain}:53 {
    bind ${l.listenIp}
    ready 127.0.0.1:${l.readyPort}
    health 127.0.0.1:${l.healthPort}
    errors
    loadbalance
    cache 5
    kubernetes ${l.clusterDomain} {
        kubeconfig ${l.kubeconfig} ${COREDNS_USER}
    }
}
`,
  );
  return { name: 'coredns', command: binary, args: ['-conf', corefile] };
}

/** What the kubernetes plugin reads, as CoreDNS' own manifests grant it. */
export async function grantCoredns(rbac: RbacAuthorizationV1Api): Promise<void> {
  const name = 'knative-prestart:coredns';
  const labels = { 'app.kubernetes.io/managed-by': MANAGED_BY };
  await rbac.deleteClusterRole({ name }).catch(() => undefined);
  await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
  await rbac.createClusterRole({
    body: {
      metadata: { name, labels },
      rules: [
        { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: COREDNS_USER }],
    },
  });
}

/**
 * Service kube-system/kube-dns at `clusterIp` (or, when another Service of the cluster holds that
 * address, one the apiserver allocates), its endpoint the CoreDNS process on `hostIp`. Returns
 * the Service's ClusterIP: the kubelet's clusterDNS.
 */
export async function publishDnsService(
  core: CoreV1Api,
  discovery: DiscoveryV1Api,
  clusterIp: string,
  hostIp: string,
  nodeName: string,
): Promise<string> {
  const namespace = 'kube-system';
  const labels = { 'k8s-app': 'kube-dns', 'app.kubernetes.io/managed-by': MANAGED_BY };
  await core.deleteNamespacedService({ name: 'kube-dns', namespace }).catch(() => undefined);
  await discovery.deleteNamespacedEndpointSlice({ name: 'kube-dns-host', namespace }).catch(() => undefined);
  const service = (ip?: string) =>
    core.createNamespacedService({
      namespace,
      body: {
        metadata: { name: 'kube-dns', labels },
        spec: {
          ...(ip ? { clusterIP: ip } : {}),
          ports: [
            { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
            { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
          ],
        },
      },
    });
  const created = await service(clusterIp).catch(() => service());
  await discovery.createNamespacedEndpointSlice({
    namespace,
    body: {
      metadata: {
        name: 'kube-dns-host',
        labels: { 'kubernetes.io/service-name': 'kube-dns', 'endpointslice.kubernetes.io/managed-by': MANAGED_BY },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [hostIp], conditions: { ready: true }, nodeName }],
      ports: [
        { name: 'dns', port: 53, protocol: 'UDP' },
        { name: 'dns-tcp', port: 53, protocol: 'TCP' },
      ],
    },
  });
  return created.spec?.clusterIP ?? clusterIp;
}
