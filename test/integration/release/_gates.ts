// Gate replicas as CLI processes for the install tests (replicas, outage, upgrade, uninstall):
// each is `knative-prestart gate` (this tree's, or a previous release's source) under the gate's
// ServiceAccount identity, listening on 127.0.0.1 ports of its own and reached at the URLs given
// (a balancer standing in for the Service, when several run).
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { GATE_GROUPS, GATE_USER } from '@knative-prestart/devcluster/gate/env.ts';
import { type GatePorts, type GateProcess, listenArgs, startGateProcess } from '@knative-prestart/devcluster/gate/process.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';

export interface ReplicaOptions {
  /** A kubeconfig for the gate's ServiceAccount (gateKubeconfig). */
  kubeconfigPath: string;
  ports: GatePorts;
  /** A gate instance other than the default, scoped to the namespaces labelled prestart.dev/gate=<instance>. */
  instance?: string;
  /** --lease-duration; default the installed one (15 s). */
  leaseSeconds?: number;
  /** A previous release's CLI entry point (_previous.ts); default this tree's. */
  cli?: string;
  /** --stamp-check: how often it looks at who stamps new Revisions; default the gate's. */
  stampCheckSeconds?: number;
}

/** The gate's ServiceAccount as the release's RBAC binds it, as a kubeconfig (a client certificate of the cluster CA). */
export function gateKubeconfig(cluster: Cluster): Promise<string> {
  return cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS);
}

/** Two free ports for a replica: webhooks and sink. */
export async function replicaPorts(urls: Partial<Pick<GatePorts, 'webhookUrl' | 'sinkUrl'>> = {}): Promise<GatePorts> {
  const [webhook, sink] = (await freePorts(2)) as [number, number];
  return { webhook, sink, ...urls };
}

export function startReplica(o: ReplicaOptions): Promise<GateProcess> {
  return startGateProcess({
    cli: o.cli,
    readyPort: o.ports.sink,
    args: [
      '--kubeconfig',
      o.kubeconfigPath,
      ...(o.instance ? ['--instance', o.instance, '--namespace-selector', `prestart.dev/gate=${o.instance}`] : []),
      ...listenArgs(o.ports),
      ...(o.leaseSeconds ? ['--lease-duration', String(o.leaseSeconds)] : []),
      ...(o.stampCheckSeconds ? ['--stamp-check', String(o.stampCheckSeconds)] : []),
      '--log-level',
      'warn',
    ],
  });
}
