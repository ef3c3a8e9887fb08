// A real node for the devcluster: containerd + runc run real pods, on a CNI bridge of ours,
// registered by a real kubelet, with kube-proxy for Services and CoreDNS as the cluster DNS.
// startNode(cluster) adds it beside kwok's fake nodes; stop() (and, for a process killed by a
// signal, the exit hook; for one killed by SIGKILL, the next start) removes everything it made
// and restores what it changed on the host (node-host.ts). What runs and why each setting:
// the files named for each part (containerd.ts, cni.ts, kubelet.ts, kube-proxy.ts, coredns.ts).
//
// Pods land here only when they ask to: the node is tainted (REAL_NODE_TAINT) and labelled;
// `placement()` gives the nodeSelector and toleration. Images must be imported ones (pull policy
// Never): `images` names those built by `build-binaries.sh node`.
import { spawn } from 'node:child_process';
import { accessSync, constants, copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, DiscoveryV1Api, RbacAuthorizationV1Api, type V1Toleration } from '@kubernetes/client-node';
import { APISERVER_SLICE, type ApiserverForward, publishApiserverEndpoint, startApiserverForward } from './apiserver-endpoint.ts';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import type { CaFiles } from './certs.ts';
import { checkPodCidrFree, DEFAULT_POD_CIDR, planPodNetwork, setUpBridge, writeCniConfig } from './cni.ts';
import { SERVICE_CLUSTER_IP_RANGE } from './components.ts';
import { containerdLayout, containerdSpec, ctr, importImage, writeContainerdConfig } from './containerd.ts';
import type { Cluster } from './control-plane.ts';
import { CLUSTER_INFO_FILE, type ClusterInfo } from './control-plane.ts';
import { COREDNS_USER, corednsSpec, grantCoredns, publishDnsService } from './coredns.ts';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { kubeProxySpec } from './kube-proxy.ts';
import { bindNodeRole, kubeletSpec } from './kubelet.ts';
import { pathEnv, realNodeUnavailable } from './node-check.ts';
import { claimHost, hostLeftovers, type NodeHostState, nodeRoot, reapNodeLeftovers, saveState, teardownHost } from './node-host.ts';
import { freePorts } from './ports.ts';
import { type Component, type ComponentSpec, describeExit, logTail, startComponent, stopComponents } from './processes.ts';
import { waitFor } from './wait.ts';

export { realNodeUnavailable } from './node-check.ts';

export const REAL_NODE_TAINT = { key: 'prestart.dev/real-node', value: 'true', effect: 'NoSchedule' };
export const REAL_NODE_LABEL = 'prestart.dev/real-node';

export interface NodeBinaries {
  kubelet: string;
  kubeProxy: string;
  coredns: string;
  pauseArchive: string;
  testAppArchive: string;
  images: { pause: string; testApp: string };
}

export interface RealNode {
  name: string;
  /** The bridge address: the Node's InternalIP, where CoreDNS listens. */
  nodeIp: string;
  podCidr: string;
  /** ClusterIP of kube-system/kube-dns (the kubelet's clusterDNS): 10.0.0.10 unless taken. */
  dnsServiceIp: string;
  images: { pause: string; testApp: string };
  dir: string;
  /** Seconds from startNode() to the node Ready with DNS and kube-proxy serving. */
  startSeconds: number;
  /** nodeSelector and tolerations for a pod spec that must run here. */
  placement(): { nodeSelector: Record<string, string>; tolerations: V1Toleration[] };
  /**
   * Imports more images (OCI archives built here) into the node's containerd under `ref`; with
   * `digest`, also under `<ref's repository>@<digest>`, the name a pull by digest would have
   * left (the CRI finds a by-digest image reference only under such a name).
   */
  importImages(images: { archive: string; ref: string; digest?: string }[]): Promise<void>;
  /** What of the node is still on the host (empty once stop() has run). */
  leftovers(): string[];
  stop(): Promise<void>;
}

export interface StartNodeOptions {
  /** Node name; default real-node. */
  name?: string;
  /** Pod range (a /16 to /28, free on this host); default 10.234.0.0/24. */
  podCidr?: string;
  /** ClusterIP for kube-dns, inside the Service range; default 10.0.0.10. */
  dnsServiceIp?: string;
  /** Deadline for the start; default 120 s. */
  timeoutMs?: number;
  /**
   * Taint the node (REAL_NODE_TAINT), so that only pods that tolerate it land here; default true.
   * false for a cluster whose only schedulable node is this one (no kwok node), where pods of
   * manifests as they are shipped (Knative's) must run unchanged.
   */
  taint?: boolean;
  progress?: (line: string) => void;
}

export function nodeBinaries(): NodeBinaries {
  const v = pinnedVersions();
  const bin = join(cacheDir(), 'bin');
  const k8s = join(bin, `kubernetes-${v.KUBERNETES_VERSION}`);
  const images = join(bin, 'node-images');
  const b = {
    kubelet: join(k8s, 'kubelet'),
    kubeProxy: join(k8s, 'kube-proxy'),
    coredns: join(bin, `coredns-${v.COREDNS_VERSION}`, 'coredns'),
    pauseArchive: join(images, 'pause.oci.tar'),
    testAppArchive: join(images, 'test-app.oci.tar'),
  };
  const missing = Object.values(b).filter((p) => {
    try {
      accessSync(p, p.endsWith('.tar') ? constants.R_OK : constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  const ref = (name: string) => {
    try {
      return readFileSync(join(images, `${name}.ref`), 'utf8').trim();
    } catch {
      missing.push(join(images, `${name}.ref`));
      return '';
    }
  };
  const refs = { pause: ref('pause'), testApp: ref('test-app') };
  if (missing.length > 0) {
    throw new ClusterStartError(
      `real node: missing ${missing.map((p) => relative(bin, p)).join(', ')} in ${bin}: run ${BUILD_SCRIPT} node`,
    );
  }
  return { ...b, images: refs };
}

/** The CA files of a cluster (started here or attached through its cluster.json). */
function clusterCa(cluster: Cluster): CaFiles {
  try {
    const info = JSON.parse(readFileSync(join(cluster.dir, CLUSTER_INFO_FILE), 'utf8')) as ClusterInfo;
    return { certFile: info.caCertFile, keyFile: info.caKeyFile };
  } catch {
    return { certFile: join(cluster.dir, 'pki', 'ca.crt'), keyFile: join(cluster.dir, 'pki', 'ca.key') };
  }
}

async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return res.status === 200;
}

export async function startNode(cluster: Cluster, opts: StartNodeOptions = {}): Promise<RealNode> {
  const started = performance.now();
  const progress = opts.progress ?? (() => {});
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  const left = () => Math.max(deadline - Date.now(), 1);
  const unavailable = realNodeUnavailable();
  if (unavailable) throw new ClusterStartError(unavailable);
  const binaries = nodeBinaries();
  for (const line of reapNodeLeftovers()) progress(line);

  const name = opts.name ?? 'real-node';
  const dir = join(nodeRoot(), `node-${process.pid}`);
  const net = planPodNetwork(dir, opts.podCidr ?? DEFAULT_POD_CIDR, SERVICE_CLUSTER_IP_RANGE);
  let dnsServiceIp = opts.dnsServiceIp ?? '10.0.0.10';
  checkPodCidrFree(net);
  const cd = containerdLayout(dir);
  const state: NodeHostState = claimHost({
    startedAt: Date.now() - 1000,
    dir,
    bridge: net.bridge,
    guardChain: net.guardChain,
    containerdAddress: cd.address,
    kubeProxyBinary: binaries.kubeProxy,
    cniNetwork: net.networkName,
  });
  const unregisterExitHook = onExit(() => {
    teardownHost(state);
  });
  startReaper();

  const components: Component[] = [];
  let stopping = false;
  const env = pathEnv();
  const launch = (spec: ComponentSpec): Component => {
    const c = startComponent({ ...spec, env: spec.env ?? env }, dir);
    components.push(c);
    state.pids.push(c.pid);
    saveState(state);
    void c.exited.then((info) => {
      if (!stopping && node)
        process.stderr.write(`real node: ${c.name} ${describeExit(info)}; last lines of ${c.logFile}:\n${logTail(c.logFile, 10)}\n`);
    });
    return c;
  };
  const earlyExit = (): Error | undefined => {
    const dead = components.find((c) => c.exitInfo !== undefined);
    if (!dead?.exitInfo) return undefined;
    return new ClusterStartError(
      `real node: ${dead.name} ${describeExit(dead.exitInfo)} during start (log: ${dead.logFile})`,
      `last lines:\n${logTail(dead.logFile)}`,
    );
  };
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  const discovery = cluster.kubeConfig.makeApiClient(DiscoveryV1Api);
  let node: RealNode | undefined;
  let apiForward: ApiserverForward | undefined;

  /** The node dir goes with teardown: its logs are copied into the cluster dir (kept when a test fails). */
  const keepLogs = () => {
    try {
      const to = join(cluster.dir, 'real-node');
      mkdirSync(to, { recursive: true });
      for (const f of readdirSync(dir)) if (f.endsWith('.log')) copyFileSync(join(dir, f), join(to, f));
    } catch {
      // No cluster dir any more, or no logs yet.
    }
  };
  const removeApiObjects = async () => {
    await Promise.allSettled([
      core.deleteNode({ name }),
      rbac.deleteClusterRoleBinding({ name: `knative-prestart:node:${name}` }),
      rbac.deleteClusterRoleBinding({ name: 'knative-prestart:coredns' }),
      rbac.deleteClusterRole({ name: 'knative-prestart:coredns' }),
      core.deleteNamespacedService({ name: 'kube-dns', namespace: 'kube-system' }),
      discovery.deleteNamespacedEndpointSlice({ name: 'kube-dns-host', namespace: 'kube-system' }),
      discovery.deleteNamespacedEndpointSlice({ name: APISERVER_SLICE, namespace: 'default' }),
    ]);
  };

  try {
    mkdirSync(dir, { recursive: true });
    setUpBridge(net);
    writeCniConfig(net, join(dir, 'cni-ipam'));
    writeContainerdConfig(cd, { sandboxImage: binaries.images.pause, cniConfDir: net.confDir });
    const containerd = launch(containerdSpec(cd));
    await waitFor(() => ctr(cd, 'version').then(() => true), {
      what: 'containerd answering on its socket',
      timeoutMs: left(),
      bail: earlyExit,
    });
    await Promise.all([
      importImage(cd, binaries.pauseArchive, binaries.images.pause),
      importImage(cd, binaries.testAppArchive, binaries.images.testApp),
    ]);
    progress(`containerd ready with the images after ${((performance.now() - started) / 1000).toFixed(1)}s`);

    const ca = clusterCa(cluster);
    const [kubeletPort, kubeletHealthz, proxyHealthz, proxyMetrics, dnsHealth, dnsReady] = (await freePorts(6)) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const [nodeKubeconfig, proxyKubeconfig, dnsKubeconfig] = await Promise.all([
      cluster.mintUserKubeconfig(`system:node:${name}`, ['system:nodes']),
      cluster.mintUserKubeconfig('system:kube-proxy'),
      cluster.mintUserKubeconfig(COREDNS_USER),
      bindNodeRole(rbac, name),
      grantCoredns(rbac),
    ]);
    dnsServiceIp = await publishDnsService(core, discovery, dnsServiceIp, net.gatewayIp, name);
    // Service default/kubernetes for the pods: apiserver-endpoint.ts.
    const apiserverPort = Number(new URL(cluster.apiserverUrl).port);
    apiForward = await startApiserverForward(net.gatewayIp, apiserverPort);
    await publishApiserverEndpoint(discovery, net.gatewayIp, apiserverPort, name);

    launch(
      corednsSpec(binaries.coredns, {
        dir,
        listenIp: net.gatewayIp,
        kubeconfig: dnsKubeconfig,
        clusterDomain: 'cluster.local',
        healthPort: dnsHealth,
        readyPort: dnsReady,
      }),
    );
    launch(
      kubeProxySpec(binaries.kubeProxy, {
        dir,
        nodeName: name,
        nodeIp: net.gatewayIp,
        kubeconfig: proxyKubeconfig,
        podCidr: net.podCidr,
        healthzPort: proxyHealthz,
        metricsPort: proxyMetrics,
      }),
    );
    launch(
      await kubeletSpec(binaries.kubelet, {
        dir,
        nodeName: name,
        nodeIp: net.gatewayIp,
        port: kubeletPort,
        healthzPort: kubeletHealthz,
        containerdAddress: cd.address,
        kubeconfig: nodeKubeconfig,
        clusterDns: dnsServiceIp,
        clusterDomain: 'cluster.local',
        taints: opts.taint === false ? [] : [REAL_NODE_TAINT],
        labels: { [REAL_NODE_LABEL]: 'true' },
        ca,
      }),
    );
    await Promise.all([
      waitFor(
        async () => {
          const n = await core.readNode({ name });
          const ready = n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
          const notReadyTaint = (n.spec?.taints ?? []).some((t) => t.key.startsWith('node.kubernetes.io/'));
          return ready && !notReadyTaint;
        },
        { what: `node ${name} Ready and untainted (kubelet + node-lifecycle-controller)`, timeoutMs: left(), bail: earlyExit },
      ),
      waitFor(() => httpOk(`http://127.0.0.1:${dnsReady}/ready`), { what: 'CoreDNS /ready', timeoutMs: left(), bail: earlyExit }),
      waitFor(() => httpOk(`http://127.0.0.1:${proxyHealthz}/healthz`), {
        what: 'kube-proxy /healthz',
        timeoutMs: left(),
        bail: earlyExit,
      }),
    ]);
    const startSeconds = (performance.now() - started) / 1000;
    progress(`real node ${name} ready after ${startSeconds.toFixed(1)}s (pods ${net.podCidr}, dir ${dir})`);

    let stopped: Promise<void> | undefined;
    node = {
      name,
      nodeIp: net.gatewayIp,
      podCidr: net.podCidr,
      dnsServiceIp,
      images: binaries.images,
      dir,
      startSeconds,
      placement: () => ({
        nodeSelector: { 'kubernetes.io/hostname': name },
        tolerations: [{ key: REAL_NODE_TAINT.key, operator: 'Equal', value: REAL_NODE_TAINT.value, effect: REAL_NODE_TAINT.effect }],
      }),
      importImages: async (images) => {
        await Promise.all(
          images.map(async (i) => {
            await importImage(cd, i.archive, i.ref);
            if (i.digest) await ctr(cd, 'images', 'tag', '--force', i.ref, `${i.ref.replace(/:[^/:]+$/, '')}@${i.digest}`);
          }),
        );
      },
      leftovers: () => hostLeftovers(state),
      stop: () => {
        stopped ??= (async () => {
          // Let the kubelet take its pods down (CNI DEL, sandboxes stopped) while it still can;
          // whatever is left after that is killed and unmounted by teardownHost.
          await drainPods(core, name, cd, binaries.images.pause).catch(() => undefined);
          stopping = true;
          const kubeletFirst = [...components].sort((a, b) => Number(b.name === 'kubelet') - Number(a.name === 'kubelet'));
          await stopComponents(
            kubeletFirst.filter((c) => c !== containerd),
            5000,
          );
          await stopComponents([containerd], 5000);
          await apiForward?.close();
          keepLogs();
          const notes = teardownHost(state);
          unregisterExitHook();
          await removeApiObjects();
          if (notes.length > 0) process.stderr.write(`real node: teardown: ${notes.join('; ')}\n`);
        })();
        return stopped;
      },
    };
    return node;
  } catch (err) {
    stopping = true;
    await stopComponents(components, 3000);
    await apiForward?.close();
    keepLogs();
    teardownHost(state);
    unregisterExitHook();
    await removeApiObjects();
    throw err;
  }
}

/** The reapers' pipes: held here so that no garbage collection closes them while we live. */
const reaperPipes: unknown[] = [];

/**
 * A detached process (node-reaper.ts) that tears the node down if this process dies by SIGKILL,
 * when no exit hook runs: it waits for the end of a pipe only we hold open.
 */
function startReaper(): void {
  const reaper = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), fileURLToPath(new URL('./node-reaper.ts', import.meta.url))],
    { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
  );
  reaper.unref();
  // Keep the write end open for our whole life, without holding the event loop.
  (reaper.stdin as unknown as { unref?: () => void }).unref?.();
  reaper.stdin?.on('error', () => {});
  reaperPipes.push(reaper.stdin);
}

/**
 * Cordons the node, deletes its pods (1 s grace) and waits (bounded) until containerd runs no
 * container but the pods' sandboxes, which the kubelet leaves to its own garbage collection:
 * teardownHost kills those and cleans their network.
 */
async function drainPods(core: CoreV1Api, name: string, cd: ReturnType<typeof containerdLayout>, pauseImage: string): Promise<void> {
  const n = await core.readNode({ name });
  n.spec = { ...n.spec, unschedulable: true };
  await core.replaceNode({ name, body: n });
  const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${name}` });
  await Promise.allSettled(
    pods.items.map((p) =>
      // 1, not 0: a forced deletion (0) removes the object at once and the kubelet then stops the
      // containers with the pod's own grace period (Knative's activator: 600 s).
      core.deleteNamespacedPod({ name: p.metadata?.name ?? '', namespace: p.metadata?.namespace ?? '', gracePeriodSeconds: 1 }),
    ),
  );
  await waitFor(
    async () => {
      const running = new Set(lines(await ctr(cd, 'tasks', 'list', '--quiet')));
      const containers = lines(await ctr(cd, 'containers', 'list')).slice(1);
      return containers.every((c) => {
        const [id, image] = c.split(/\s+/);
        return !running.has(id ?? '') || image === pauseImage;
      });
    },
    // Short: Knative's activator and webhook outlive even a 1 s deletion grace here (seen: over
    // 20 s), and teardownHost kills what is left as surely; a longer wait only slowed every stop.
    { what: "pods' containers of the real node stopped", timeoutMs: 5_000 },
  );
}

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');
