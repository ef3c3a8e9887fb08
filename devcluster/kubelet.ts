// The real node's kubelet (k8s.io/kubernetes cmd/kubelet, same version as the control plane),
// registered to the devcluster's apiserver as system:node:<name> with a client certificate from
// the cluster's CA, on our containerd. Settings checked on this machine
// (../shared/notes/knative-facts.md): cgroupfs (containerd 1.6 cannot report its driver), cgroup
// v1 accepted, no swap check, no iptables chains of its own (makeIPTablesUtilChains: false: its
// KUBE-FIREWALL would drop non-loopback traffic to 127.0.0.0/8 for the whole host), a
// resolv.conf of ours (pods get the cluster DNS and no nameserver of the host).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { CaFiles } from './certs.ts';
import { issueCertificate } from './certs.ts';
import type { ComponentSpec } from './processes.ts';

export interface KubeletLayout {
  dir: string;
  nodeName: string;
  nodeIp: string;
  port: number;
  healthzPort: number;
  containerdAddress: string;
  kubeconfig: string;
  clusterDns: string;
  clusterDomain: string;
  taints: { key: string; value: string; effect: string }[];
  labels: Record<string, string>;
  ca: CaFiles;
}

/** The bootstrap ClusterRole system:node, bound to this node's user (Node authorization is off here). */
export async function bindNodeRole(rbac: RbacAuthorizationV1Api, nodeName: string): Promise<void> {
  const name = `knative-prestart:node:${nodeName}`;
  await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'knative-prestart-devcluster' } },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: `system:node:${nodeName}` }],
    },
  });
}

export async function kubeletSpec(kubeletBinary: string, l: KubeletLayout): Promise<ComponentSpec> {
  const serving = await issueCertificate(l.ca, join(l.dir, 'pki'), 'kubelet-serving', {
    commonName: `system:node:${l.nodeName}`,
    organizations: ['system:nodes'],
    server: { ips: [l.nodeIp, '127.0.0.1'], dnsNames: [l.nodeName] },
  });
  const resolvConf = join(l.dir, 'resolv.conf');
  writeFileSync(resolvConf, '');
  const config = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: l.nodeIp,
    port: l.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: l.healthzPort,
    tlsCertFile: serving.certFile,
    tlsPrivateKeyFile: serving.keyFile,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: l.ca.certFile } },
    authorization: { mode: 'Webhook' },
    containerRuntimeEndpoint: `unix://${l.containerdAddress}`,
    cgroupDriver: 'cgroupfs',
    cgroupsPerQOS: true,
    failSwapOn: false,
    failCgroupV1: false,
    makeIPTablesUtilChains: false,
    // The kubelet would refuse to start on this host's kernel.panic=1 etc.: node-host.ts saves
    // and restores the sysctls it sets instead.
    protectKernelDefaults: false,
    resolvConf,
    clusterDNS: [l.clusterDns],
    clusterDomain: l.clusterDomain,
    podLogsDir: join(l.dir, 'pod-logs'),
    volumePluginDir: join(l.dir, 'volume-plugins'),
    registerWithTaints: l.taints,
    // Never pull: every image is imported from an archive built here.
    serializeImagePulls: true,
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    // A shared, busy 2-core machine: evict only when truly out of room.
    evictionHard: { 'memory.available': '50Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    shutdownGracePeriod: '0s',
    nodeStatusUpdateFrequency: '5s',
    syncFrequency: '10s',
    rotateCertificates: false,
    serverTLSBootstrap: false,
    staticPodPath: '',
    maxPods: 110,
  };
  const configFile = join(l.dir, 'kubelet-config.json');
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  return {
    name: 'kubelet',
    command: kubeletBinary,
    args: [
      `--config=${configFile}`,
      `--kubeconfig=${l.kubeconfig}`,
      `--root-dir=${join(l.dir, 'root')}`,
      `--cert-dir=${join(l.dir, 'pki')}`,
      `--hostname-override=${l.nodeName}`,
      `--node-ip=${l.nodeIp}`,
      `--node-labels=${Object.entries(l.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')}`,
      '--v=1',
    ],
  };
}
