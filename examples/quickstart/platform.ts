// Phases 2 to 4: a control plane of its own, Knative Serving's real controllers (plus the one
// stand-in, for the networking layer), the project's manifests, the gate and the example hook,
// all on 127.0.0.1. Built from the same pieces the end-to-end suite uses.
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyManifests, servesMutatingPolicies } from '@knative-prestart/devcluster/apply.ts';
import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { GATE_USER } from '@knative-prestart/devcluster/gate/env.ts';
import { allowGateTriggers } from '@knative-prestart/devcluster/gate/trigger-rights.ts';
import { ALL_NAMESPACES, startIngressStandIn } from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeEventing, startKnativeEventing } from '@knative-prestart/devcluster/knative-eventing.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { KNATIVE_NAMESPACE, startKnativeServingPods } from '@knative-prestart/devcluster/knative-serving-pods.ts';
import { clustersRoot } from '@knative-prestart/devcluster/leftovers.ts';
import { type RealNode, startNode } from '@knative-prestart/devcluster/node.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { DEFAULTS } from '../../gate/config.ts';
import { type RunningGate, startGate } from '../../gate/gate.ts';
import type { HookServer } from '../../hooks/index.ts';
import { start as startBindingHook } from '../typescript-binding-hook/index.ts';
import { kubernetesSecrets } from '../typescript-binding-hook/secrets.ts';
import { createDemoNamespace, type Demo, type DemoBroker } from './demo.ts';

const configDir = fileURLToPath(new URL('../../config/', import.meta.url));
/**
 * config/100-* (CRDs), 200-* (the hold policies; 230, the apiserver's stamp, where the apiserver
 * serves MutatingAdmissionPolicy v1), 300-* (RBAC), 400-* (the webhook configuration, which the
 * gate may update but not create; it rewrites it to its URL on 127.0.0.1 at start). Not 500, the
 * gate's Deployment: this gate runs in this process.
 */
export function projectManifests(): string[] {
  return readdirSync(configDir)
    .filter((f) => /^[1234]\d\d-.*\.ya?ml$/.test(f))
    .sort()
    .map((f) => join(configDir, f));
}
const GATE_GROUPS = ['system:serviceaccounts', `system:serviceaccounts:${DEFAULTS.namespace}`, 'system:authenticated'];

/**
 * In the temp directory every local cluster uses, so a quickstart killed outright is reaped by
 * the next start of any cluster; removed when the quickstart stops.
 */
export async function startQuickstartCluster(
  progress: (line: string) => void,
  onDir: (dir: string) => void,
  { kwokNodes }: { kwokNodes: number },
): Promise<Cluster> {
  await mkdir(clustersRoot(), { recursive: true });
  const dir = await mkdtemp(join(clustersRoot(), 'quickstart-'));
  onDir(dir);
  return startCluster({ dir, progress, nodes: kwokNodes });
}

/** The demo's real node, untainted: it is the cluster's only node, and Knative's manifests run on it unchanged. */
export function startDemoNode(cluster: Cluster, progress: (line: string) => void): Promise<RealNode> {
  return startNode(cluster, { taint: false, progress });
}

/** Knative Serving as the demo runs it: host processes beside kwok nodes, or pods on the real node. */
export interface Serving {
  /** "host processes ... (logs in DIR)" or "pods on node real-node ...": for the ready line. */
  how: string;
  /** Log files, or the kubectl command that shows the pods' logs. */
  logs: string[];
  stop(): Promise<void>;
}

export async function startServing(cluster: Cluster, progress: (line: string) => void, node?: RealNode): Promise<Serving> {
  // Every namespace, so that a Service the user creates elsewhere (as "Look around" invites) becomes Ready too.
  const standIn = startIngressStandIn(cluster.kubeConfig, ALL_NAMESPACES);
  try {
    if (node) {
      const pods = await startKnativeServingPods(cluster, node, { progress });
      return {
        how:
          `pods on node ${node.name}, from Knative's release manifests: controller, webhook (called through its Service), ` +
          'activator and the KPA autoscaler; each Revision gets its queue-proxy',
        logs: [`kubectl logs -n ${KNATIVE_NAMESPACE} deploy/controller (or activator, autoscaler, webhook)`],
        stop: async () => {
          standIn.stop();
          await pods.stop();
        },
      };
    }
    const knative: KnativeServing = await startKnativeServing(cluster, { progress });
    return {
      how: `its own reconcilers, webhook and HPA autoscaler as host processes (logs in ${knative.logsDir})`,
      logs: [join(knative.logsDir, '*.log')],
      stop: async () => {
        standIn.stop();
        await knative.stop();
      },
    };
  } catch (err) {
    standIn.stop();
    throw err;
  }
}

/** `--broker`: Knative Eventing's MT channel-based Broker `default` in the demo's namespace. */
export interface Bus {
  eventing: KnativeEventing;
  broker: DemoBroker;
}

export async function startBus(cluster: Cluster, demo: Demo, progress: (line: string) => void): Promise<Bus> {
  const eventing = await startKnativeEventing(cluster, { progress });
  const broker = { name: 'default', namespace: demo.namespace };
  try {
    await createDemoNamespace(cluster.kubeConfig, demo);
    await eventing.createBroker(broker.namespace, broker.name);
  } catch (err) {
    await eventing.stop();
    throw err;
  }
  return { eventing, broker };
}

export async function installProject(kc: KubeConfig): Promise<void> {
  const stampServed = await servesMutatingPolicies(kc);
  for (const file of projectManifests()) {
    if (file.endsWith(APISERVER_STAMP) && !stampServed) continue;
    await applyManifests(kc, file);
  }
}

const APISERVER_STAMP = '230-stamp-mutating-policy.yaml';

/**
 * The gate as installed cluster-wide (instance "default", every namespace but the system ones),
 * run in this process under its own service-account identity, so RBAC and the policies apply
 * as in a real install. Its webhooks are registered by URL on 127.0.0.1.
 */
export async function startGateHere(cluster: Cluster, logFile: string, bus?: Bus): Promise<RunningGate> {
  const kubeconfig = await cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS);
  // With the bus, the gate keeps the Triggers (where an admin lets it: the Broker's namespace);
  // its reply Trigger needs the sink's URL up front.
  if (bus) await allowGateTriggers(cluster.kubeConfig, bus.broker.namespace);
  const [sinkPort] = bus ? ((await freePorts(1)) as [number]) : [0];
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const gate = await startGate(
    {
      kubeConfig: kc,
      namespace: DEFAULTS.namespace,
      instance: DEFAULTS.instance,
      identity: `quickstart-${process.pid}-${randomBytes(2).toString('hex')}`,
      webhook: { host: '127.0.0.1', port: 0, bindingRoot: DEFAULTS.bindingRoot },
      sink: { host: '127.0.0.1', port: sinkPort, maxBytes: DEFAULTS.maxReplyBytes },
      source: DEFAULTS.source,
      workers: DEFAULTS.workers,
      ...(bus
        ? {
            triggers: { replyUri: `http://127.0.0.1:${sinkPort}/events`, namespaces: [bus.broker.namespace] },
            broker: { proxy: bus.eventing.proxyUrl },
          }
        : {}),
    },
    pino({ name: 'gate', level: 'info' }, pino.destination({ dest: logFile, sync: true })),
  );
  try {
    await waitFor(() => gate.isLeader(), { timeoutMs: 30_000, what: 'the gate to take its leader lease' });
  } catch (err) {
    await gate.stop();
    throw err;
  }
  return gate;
}

/**
 * examples/typescript-binding-hook, serving the PrestartHook `name` on a free port of 127.0.0.1,
 * storing the credentials Secret with the admin's kubeconfig (in a cluster: its service account).
 */
export function startExampleHook(name: string, provisionMs: number, logFile: string, kc: KubeConfig, bus?: Bus): Promise<HookServer> {
  return startBindingHook({
    name,
    port: 0,
    host: '127.0.0.1',
    durationMs: provisionMs,
    secrets: kubernetesSecrets(kc),
    // K_SINK, as a SinkBinding would set it: replies go to the Broker; without the bus, to the gate.
    sink: bus ? bus.eventing.ingressUrl(bus.broker.namespace, bus.broker.name) : '',
    logger: pino({ name: `hook-${name}`, level: 'info' }, pino.destination({ dest: logFile, sync: true })),
  });
}
