// kube-proxy for the real node (k8s.io/kubernetes cmd/kube-proxy, same version as the control
// plane), iptables mode (IPVS cannot work here: no ip_vs; nftables mode needs the nft tool),
// as system:kube-proxy (bound to system:node-proxier by the apiserver's bootstrap RBAC). It
// writes no sysctl: conntrack limits and timeouts are left as they are (0 = do not touch),
// localhost NodePorts are off (they set route_localnet), NodePorts only on the bridge address.
// Its rules are removed by `kube-proxy --cleanup` on teardown (node-host.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ComponentSpec } from './processes.ts';

export interface KubeProxyLayout {
  dir: string;
  nodeName: string;
  nodeIp: string;
  kubeconfig: string;
  podCidr: string;
  healthzPort: number;
  metricsPort: number;
}

export function kubeProxySpec(binary: string, l: KubeProxyLayout): ComponentSpec {
  const config = {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'iptables',
    clientConnection: { kubeconfig: l.kubeconfig },
    hostnameOverride: l.nodeName,
    bindAddress: l.nodeIp,
    healthzBindAddress: `127.0.0.1:${l.healthzPort}`,
    metricsBindAddress: `127.0.0.1:${l.metricsPort}`,
    clusterCIDR: l.podCidr,
    detectLocalMode: 'ClusterCIDR',
    nodePortAddresses: [`${l.nodeIp}/32`],
    oomScoreAdj: 0,
    iptables: { localhostNodePorts: false, masqueradeAll: false, syncPeriod: '30s', minSyncPeriod: '0s' },
    conntrack: {
      maxPerCore: 0,
      min: 0,
      tcpEstablishedTimeout: '0s',
      tcpCloseWaitTimeout: '0s',
      udpTimeout: '0s',
      udpStreamTimeout: '0s',
    },
  };
  const configFile = join(l.dir, 'kube-proxy-config.json');
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  return { name: 'kube-proxy', command: binary, args: [`--config=${configFile}`, '--v=1'] };
}
