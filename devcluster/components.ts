import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Node } from '@kubernetes/client-node';
import type { ControlPlaneBinaries } from './binaries.ts';
import type { CaFiles, CertFiles } from './certs.ts';
import type { ComponentSpec } from './processes.ts';

/** Where everything of one cluster is: the flags of each component are derived from it. */
export interface ControlPlaneLayout {
  dir: string;
  binaries: ControlPlaneBinaries;
  ports: { apiserver: number; etcd: number; etcdPeer: number };
  ca: CaFiles;
  apiserverServing: CertFiles;
  /** The apiserver's client certificate towards kubelets (logs, exec, port-forward). */
  kubeletClient: CertFiles;
  serviceAccountKey: { keyFile: string; publicKeyFile: string };
  kubeconfigs: { admin: string; controllerManager: string; scheduler: string; kwok: string };
}

/** Annotation kwok selects its nodes by (--manage-nodes-with-annotation-selector). */
export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node';
export const SERVICE_CLUSTER_IP_RANGE = '10.0.0.0/24';
const POD_CIDR = '10.244.0.0/16';

// What the gate's tests exercise: Deployments/ReplicaSets/Jobs and their pods, garbage
// collection through owner references, namespace deletion, the default ServiceAccount, Service
// endpoints (Knative reads them), node-lifecycle, which lifts the not-ready taint that the
// TaintNodesByCondition admission plugin puts on every new Node, ClusterRole aggregation (CRDs'
// roles folded into admin/edit/view) and the type-check status of ValidatingAdmissionPolicies.
// EndpointSlice mirroring: Knative's ServerlessServices write v1 Endpoints of selectorless
// Services (the activator or the pods behind a Revision's public Service); kube-proxy on the
// real node reads only EndpointSlices, so without it those Services have no endpoints.
export const CONTROLLERS = [
  'deployment-controller',
  'replicaset-controller',
  'job-controller',
  'garbage-collector-controller',
  'namespace-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'endpoints-controller',
  'endpointslice-controller',
  'endpointslice-mirroring-controller',
  'node-lifecycle-controller',
  'pod-garbage-collector-controller',
  // A PodDisruptionBudget counts only once this controller computes its status; until then the
  // Eviction API refuses every eviction (the gate's release ships a PDB).
  'disruption-controller',
  'clusterrole-aggregation-controller',
  'validatingadmissionpolicy-status-controller',
];

export function etcdSpec(l: ControlPlaneLayout): ComponentSpec {
  const peer = `http://127.0.0.1:${l.ports.etcdPeer}`;
  return {
    name: 'etcd',
    command: l.binaries.etcd,
    args: [
      '--name=knative-prestart',
      `--data-dir=${join(l.dir, 'etcd-data')}`,
      `--listen-client-urls=http://127.0.0.1:${l.ports.etcd}`,
      `--advertise-client-urls=http://127.0.0.1:${l.ports.etcd}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=knative-prestart=${peer}`,
      // Throwaway data: durability buys nothing and fsync is the slowest part of a write.
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ],
    hardStop: true,
  };
}

/** Flags as controller-runtime's envtest sets them, plus RBAC and client-certificate auth. */
export function apiserverSpec(l: ControlPlaneLayout): ComponentSpec {
  return {
    name: 'kube-apiserver',
    command: l.binaries.kubeApiserver,
    args: [
      `--etcd-servers=http://127.0.0.1:${l.ports.etcd}`,
      // No default route on these machines: the apiserver cannot guess an address.
      '--advertise-address=127.0.0.1',
      '--bind-address=127.0.0.1',
      `--secure-port=${l.ports.apiserver}`,
      `--cert-dir=${join(l.dir, 'pki')}`,
      `--tls-cert-file=${l.apiserverServing.certFile}`,
      `--tls-private-key-file=${l.apiserverServing.keyFile}`,
      `--client-ca-file=${l.ca.certFile}`,
      '--authorization-mode=RBAC',
      `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${l.serviceAccountKey.publicKeyFile}`,
      `--service-account-signing-key-file=${l.serviceAccountKey.keyFile}`,
      '--allow-privileged=true',
      '--profiling=false',
      // The reconciler would publish 127.0.0.1 as the endpoint of Service default/kubernetes,
      // which Endpoints validation refuses (loopback): it would only retry and log forever.
      '--endpoint-reconciler-type=none',
      // kubectl logs/exec/port-forward on a real node (node.ts): the apiserver authenticates to
      // the kubelet with this certificate and verifies the kubelet's serving certificate against
      // the cluster CA, which signed it (kubelet.ts); kwok's nodes serve no kubelet API at all.
      `--kubelet-client-certificate=${l.kubeletClient.certFile}`,
      `--kubelet-client-key=${l.kubeletClient.keyFile}`,
      `--kubelet-certificate-authority=${l.ca.certFile}`,
      // The default order tries the node's Hostname first, which would be a DNS lookup on the
      // host's resolver: the InternalIP (the bridge address, in the kubelet's serving cert) only.
      '--kubelet-preferred-address-types=InternalIP',
    ],
    hardStop: true,
  };
}

export function controllerManagerSpec(l: ControlPlaneLayout): ComponentSpec {
  return {
    name: 'kube-controller-manager',
    command: l.binaries.kubeControllerManager,
    args: [
      `--kubeconfig=${l.kubeconfigs.controllerManager}`,
      `--controllers=${CONTROLLERS.join(',')}`,
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${l.serviceAccountKey.keyFile}`,
      `--root-ca-file=${l.ca.certFile}`,
      '--leader-elect=false',
      '--secure-port=0',
    ],
  };
}

/** --kubeconfig and --leader-elect are deprecated for the scheduler: it takes a config file. */
export async function schedulerSpec(l: ControlPlaneLayout): Promise<ComponentSpec> {
  const config = join(l.dir, 'kube-scheduler.config.json');
  await writeFile(
    config,
    JSON.stringify({
      apiVersion: 'kubescheduler.config.k8s.io/v1',
      kind: 'KubeSchedulerConfiguration',
      clientConnection: { kubeconfig: l.kubeconfigs.scheduler },
      leaderElection: { leaderElect: false },
    }),
  );
  return { name: 'kube-scheduler', command: l.binaries.kubeScheduler, args: [`--config=${config}`, '--secure-port=0'] };
}

/** Stages of our own on top of kwok's (a Job pod that fails on demand): see the file. */
export const KWOK_TEST_STAGES = fileURLToPath(new URL('./kwok-test-stages.yaml', import.meta.url));

export function kwokSpec(l: ControlPlaneLayout): ComponentSpec {
  return {
    name: 'kwok',
    command: l.binaries.kwok,
    args: [
      `--kubeconfig=${l.kubeconfigs.kwok}`,
      `--config=${l.binaries.kwokStages}`,
      `--config=${KWOK_TEST_STAGES}`,
      `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
      // kwok renews each node's Lease, so node-lifecycle-controller keeps the node Ready.
      '--node-lease-duration-seconds=40',
      `--cidr=${POD_CIDR}`,
      '--node-ip=127.0.0.1',
    ],
    // kwok also loads ~/.kwok/kwok.yaml when present: point HOME at a directory with none.
    env: { ...process.env, HOME: l.dir },
  };
}

/** A Node that kwok plays the kubelet of: pods bound to it become Running and Ready. */
export function kwokNode(name: string): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { [KWOK_NODE_ANNOTATION]: 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', type: 'kwok' },
    },
  };
}
