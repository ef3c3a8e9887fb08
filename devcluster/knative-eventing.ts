// Knative Eventing's MT channel-based Broker over the InMemoryChannel on the local control plane:
// its reconcilers (Broker, Trigger, Channel, Subscription, EventPolicy, InMemoryChannel; why one
// process: devcluster/knative-eventing/main.go) and its data plane (broker ingress, broker
// filter, channel dispatcher), the upstream binaries built from the pinned Go module by
// build-binaries.sh, configured from the same module's manifests.
//
// How the data plane finds its parts without cluster DNS (docs/testing.md):
// - every Go process gets HTTP_PROXY pointing at devcluster/service-proxy.ts, which maps
//   `broker-ingress.knative-eventing.svc.cluster.local`, `broker-filter...` and the channels'
//   `*-kn-channel.<ns>.svc.cluster.local` names to where those processes listen;
// - the dispatcher binds :8080/:8443 (constants in its code), so it runs in a network namespace
//   of its own (devcluster/netns.ts) and reaches the apiserver through a TCP forward on the
//   namespace's host address;
// - the Deployments and Services of Eventing's manifests are applied so that kwok pods make them
//   Available and EndpointSlices exist, which is what the reconcilers check; nothing dials them.
// Not run: Eventing's webhook (Brokers get their class annotation and config, and Triggers their
// broker label, from createBroker/the gate, as the webhook's defaulting would), sources,
// sequences, parallels, and the TLS features (off by default in config-features).
//
// Sender identity (`oidc: true`): `authentication-oidc: enabled` in config-features before anything
// starts, so every Broker, Channel and Trigger gets an audience and an OIDC ServiceAccount, and the
// ingress, filter and dispatcher check tokens against the apiserver's OIDC discovery. That
// discovery is read at https://kubernetes.default.svc, through HTTPS_PROXY: the apiserver tunnel
// (devcluster/apiserver-tunnel.ts, a stand-in for cluster DNS and the `kubernetes` Service). Its
// keys (jwks_uri) are at https://127.0.0.1:<port>, the apiserver's own address: reached directly by
// the host processes, and inside the dispatcher's network namespace through a forward of that
// namespace's 127.0.0.1:<port> to the host (a stand-in for the Service's ClusterIP).
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { type ApiserverTunnel, startApiserverTunnel } from './apiserver-tunnel.ts';
import { applyManifests } from './apply.ts';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import type { Cluster } from './control-plane.ts';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { kubeRequest } from './kube-request.ts';
import { createNetworkNamespace, type NetworkNamespace } from './netns.ts';
import { freePorts } from './ports.ts';
import { type Component, type ComponentSpec, describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { type ServiceProxy, startServiceProxy, type Upstream } from './service-proxy.ts';
import { WaitTimeoutError, waitFor } from './wait.ts';

export const EVENTING_NAMESPACE = 'knative-eventing';
const SA = (name: string) => `system:serviceaccount:${EVENTING_NAMESPACE}:${name}`;
const SA_GROUPS = ['system:serviceaccounts', `system:serviceaccounts:${EVENTING_NAMESPACE}`, 'system:authenticated'];
/** Where the dispatcher listens inside its namespace (cmd/in_memory/channel_dispatcher's constant). */
const DISPATCHER_PORT = 8080;

export interface KnativeEventing {
  logsDir: string;
  /** The proxy that stands in for cluster DNS, for a host process that sends to a Broker address. */
  proxyUrl: string;
  /** A Broker's ingress as a process on this host reaches it (what K_SINK resolves to in a pod). */
  ingressUrl(namespace: string, broker: string): string;
  /** Creates an MT channel-based Broker over the InMemoryChannel and waits until it is Ready. */
  createBroker(namespace: string, name: string, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface StartKnativeEventingOptions {
  /** Default: <cluster.dir>/knative-eventing. */
  logsDir?: string;
  /** Deadline for the whole start; default 90 s. */
  timeoutMs?: number;
  progress?: (line: string) => void;
  /**
   * Knative Eventing's sender identity: `authentication-oidc: enabled` in config-features. Brokers
   * then announce an audience and refuse requests without a valid token; EventPolicies decide who
   * may send (examples/eventpolicy.yaml). Default off.
   */
  oidc?: boolean;
}

interface EventingArtifacts {
  controllers: string;
  ingress: string;
  filter: string;
  dispatcher: string;
  config: string;
}

function eventingArtifacts(): EventingArtifacts {
  const version = pinnedVersions().KNATIVE_EVENTING_VERSION;
  if (!version) throw new ClusterStartError('devcluster/versions.env has no KNATIVE_EVENTING_VERSION');
  const dir = join(cacheDir(), 'bin', `knative-eventing-${version}`);
  const a: EventingArtifacts = {
    controllers: join(dir, 'eventing-controllers'),
    ingress: join(dir, 'broker-ingress'),
    filter: join(dir, 'broker-filter'),
    dispatcher: join(dir, 'in_memory-channel_dispatcher'),
    config: join(dir, 'config'),
  };
  const missing = [a.controllers, a.ingress, a.filter, a.dispatcher, join(a.config, 'channels')].filter((p) => !existsSync(p));
  if (missing.length > 0) {
    throw new ClusterStartError(
      `missing Knative Eventing ${version} build output (${missing.join(', ')}): run ${BUILD_SCRIPT} knative-eventing`,
    );
  }
  return a;
}

/** Eventing's manifests in dependency order: namespace, CRDs, RBAC, config, data-plane objects. */
function manifestSources(config: string): string[] {
  const imc = join(config, 'channels', 'in-memory-channel');
  const broker = join(config, 'brokers', 'mt-channel-broker');
  return [
    join(config, 'core', '100-namespace.yaml'),
    join(config, 'core', 'resources'),
    join(imc, 'resources'),
    join(config, 'core', 'roles'),
    join(config, 'core', '200-eventing-serviceaccount.yaml'),
    join(broker, 'roles'),
    join(imc, 'roles'),
    join(imc, '200-imc-controller-serviceaccount.yaml'),
    join(imc, '200-imc-dispatcher-serviceaccount.yaml'),
    join(config, 'core', 'configmaps'),
    join(imc, 'configmaps'),
    join(broker, 'deployments', 'broker-ingress.yaml'),
    join(broker, 'deployments', 'broker-filter.yaml'),
    join(imc, 'deployments', 'dispatcher.yaml'),
    join(imc, 'deployments', 'dispatcher-service.yaml'),
  ];
}

/** The InMemoryChannel reconciler runs in the eventing-controller process: give that identity its rights. */
const IMC_RECONCILER_BINDING = JSON.stringify({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRoleBinding',
  metadata: { name: 'knative-prestart-e2e-imc-reconciler' },
  subjects: [{ kind: 'ServiceAccount', name: 'eventing-controller', namespace: EVENTING_NAMESPACE }],
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'imc-controller' },
});

/** Copies a kubeconfig, pointed at the apiserver through `server` but still verifying the 127.0.0.1 certificate. */
async function retargetKubeconfig(path: string, server: string, out: string): Promise<void> {
  const kc = JSON.parse(await readFile(path, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
  for (const c of kc.clusters) {
    c.cluster.server = server;
    c.cluster['tls-server-name'] = '127.0.0.1';
  }
  await writeFile(out, JSON.stringify(kc, null, 2), { mode: 0o600 });
}

function forwardTcp(listenHost: string, listenPort: number, to: Upstream): Promise<Server> {
  const server = createServer((client) => {
    const upstream = connect(to.port, to.host);
    client.pipe(upstream).pipe(client);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, listenHost, () => resolve(server));
  });
}

async function reachable(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(1000) });
    return true;
  } catch {
    return false;
  }
}

export async function startKnativeEventing(cluster: Cluster, opts: StartKnativeEventingOptions = {}): Promise<KnativeEventing> {
  const started = performance.now();
  const progress = opts.progress ?? (() => {});
  const deadline = Date.now() + (opts.timeoutMs ?? 90_000);
  const left = () => Math.max(deadline - Date.now(), 1);
  const artifacts = eventingArtifacts();
  const logsDir = opts.logsDir ?? join(cluster.dir, 'knative-eventing');
  await mkdir(logsDir, { recursive: true });
  const admin = cluster.kubeConfig;
  for (const source of manifestSources(artifacts.config)) {
    await applyManifests(admin, source, { namespace: EVENTING_NAMESPACE, timeoutMs: left() });
  }
  await applyManifests(admin, IMC_RECONCILER_BINDING);
  if (opts.oidc) await enableOidc(admin);

  const netns: NetworkNamespace = createNetworkNamespace();
  const servers: Server[] = [];
  let proxy: ServiceProxy | undefined;
  let tunnel: ApiserverTunnel | undefined;
  const components: Component[] = [];
  let stopping = false;
  const unregisterExitHook = onExit(() => {
    stopping = true;
    for (const c of components) signalGroup(c.pid, 'SIGKILL');
    netns.remove();
  });
  const release = async () => {
    stopping = true;
    await stopComponents(components, 5000);
    await proxy?.close();
    await tunnel?.close();
    for (const s of servers) s.close();
    netns.remove();
    unregisterExitHook();
  };

  try {
    const apiPort = Number(new URL(cluster.apiserverUrl).port);
    servers.push(await forwardTcp(netns.hostIp, apiPort, { host: '127.0.0.1', port: apiPort }));
    const [ingressPort, ingressTlsPort, filterPort, filterTlsPort, ...profiling] = (await freePorts(8)) as number[];
    const dispatcher: Upstream = { host: netns.innerIp, port: DISPATCHER_PORT };
    const routes = new Map<string, Upstream>([
      [`broker-ingress.${EVENTING_NAMESPACE}.svc.cluster.local`, { host: '127.0.0.1', port: ingressPort as number }],
      [`broker-filter.${EVENTING_NAMESPACE}.svc.cluster.local`, { host: '127.0.0.1', port: filterPort as number }],
      [`imc-dispatcher.${EVENTING_NAMESPACE}.svc.cluster.local`, dispatcher],
    ]);
    const channelHost = /^[a-z0-9-]+-kn-channel\.[a-z0-9-]+\.svc\.cluster\.local$/;
    proxy = await startServiceProxy({
      hosts: ['127.0.0.1', netns.hostIp],
      route: (host) => routes.get(host) ?? (channelHost.test(host) ? dispatcher : undefined),
      logFile: join(logsDir, 'service-proxy.log'),
    });
    const [hostProxy, nsProxy] = proxy.urls as [string, string];
    // HTTPS from Eventing's processes: only the OIDC discovery at kubernetes.default.svc (see the top).
    if (opts.oidc) {
      tunnel = await startApiserverTunnel({
        hosts: ['127.0.0.1', netns.hostIp],
        apiserver: { host: '127.0.0.1', port: apiPort },
        logFile: join(logsDir, 'apiserver-tunnel.log'),
      });
    }
    const [hostTunnel, nsTunnel] = tunnel?.urls ?? [hostProxy, nsProxy];

    const [controllerKc, ingressKc, filterKc, dispatcherKcLocal] = await Promise.all(
      ['eventing-controller', 'mt-broker-ingress', 'mt-broker-filter', 'imc-dispatcher'].map((sa) =>
        cluster.mintUserKubeconfig(SA(sa), SA_GROUPS),
      ),
    );
    const dispatcherKc = join(logsDir, 'imc-dispatcher.kubeconfig');
    await retargetKubeconfig(dispatcherKcLocal as string, `https://${netns.hostIp}:${apiPort}`, dispatcherKc);

    const env = (component: string, profilingPort: number, proxyUrl: string, httpsProxyUrl: string): NodeJS.ProcessEnv => ({
      PATH: process.env.PATH,
      HOME: logsDir,
      SYSTEM_NAMESPACE: EVENTING_NAMESPACE,
      POD_NAME: `${component}-${process.pid}`,
      CONTAINER_NAME: component,
      CONFIG_LOGGING_NAME: 'config-logging',
      CONFIG_OBSERVABILITY_NAME: 'config-observability',
      METRICS_DOMAIN: 'knative.dev/eventing',
      PROFILING_PORT: String(profilingPort),
      HTTP_PROXY: proxyUrl,
      HTTPS_PROXY: httpsProxyUrl,
    });
    const specs: ComponentSpec[] = [
      {
        name: 'eventing-controllers',
        command: artifacts.controllers,
        args: [`--kubeconfig=${controllerKc}`],
        env: {
          ...env('controller', profiling[0] as number, hostProxy, hostTunnel as string),
          NAMESPACE: EVENTING_NAMESPACE,
          // What the InMemoryChannel reconciler writes into the dispatcher Deployment it keeps.
          DISPATCHER_IMAGE: `dev.local/knative-eventing/imc-dispatcher:${pinnedVersions().KNATIVE_EVENTING_VERSION}`,
        },
      },
      {
        name: 'broker-ingress',
        command: artifacts.ingress,
        args: [`--kubeconfig=${ingressKc}`],
        env: {
          ...env('ingress', profiling[1] as number, hostProxy, hostTunnel as string),
          NAMESPACE: EVENTING_NAMESPACE,
          INGRESS_PORT: String(ingressPort),
          INGRESS_PORT_HTTPS: String(ingressTlsPort),
        },
      },
      {
        name: 'broker-filter',
        command: artifacts.filter,
        args: [`--kubeconfig=${filterKc}`],
        env: {
          ...env('filter', profiling[2] as number, hostProxy, hostTunnel as string),
          NAMESPACE: EVENTING_NAMESPACE,
          FILTER_PORT: String(filterPort),
          FILTER_PORT_HTTPS: String(filterTlsPort),
        },
      },
      {
        // No NAMESPACE: with it set, the dispatcher would serve only that namespace's channels.
        name: 'imc-dispatcher',
        command: netns.execPrefix[0] as string,
        args: [...netns.execPrefix.slice(1), artifacts.dispatcher, `--kubeconfig=${dispatcherKc}`],
        env: {
          ...env('dispatcher', profiling[3] as number, nsProxy, nsTunnel as string),
          NO_PROXY: netns.hostIp,
          MAX_IDLE_CONNS: '1000',
          MAX_IDLE_CONNS_PER_HOST: '1000',
        },
      },
    ];
    if (opts.oidc) {
      // The apiserver's jwks_uri (https://127.0.0.1:<port>/...) as seen from inside the namespace.
      specs.unshift({
        name: 'netns-apiserver-forward',
        command: netns.execPrefix[0] as string,
        args: [...netns.execPrefix.slice(1), process.execPath, '-e', loopbackForwardScript(apiPort, netns.hostIp)],
        env: { PATH: process.env.PATH },
      });
    }
    for (const spec of specs) {
      const c = startComponent(spec, logsDir);
      components.push(c);
      void c.exited.then((info) => {
        if (!stopping) {
          process.stderr.write(
            `knative-eventing: ${c.name} ${describeExit(info)}; last lines of ${c.logFile}:\n${logTail(c.logFile, 10)}\n`,
          );
        }
      });
    }
    const earlyExit = (): Error | undefined => {
      const dead = components.find((c) => c.exitInfo !== undefined);
      if (!dead?.exitInfo) return undefined;
      return new ClusterStartError(
        `knative-eventing: ${dead.name} ${describeExit(dead.exitInfo)} during start (full log: ${dead.logFile})`,
        `last lines of ${dead.name}.log:\n${logTail(dead.logFile)}`,
      );
    };
    for (const [what, url] of [
      ['the broker ingress', `http://127.0.0.1:${ingressPort}/`],
      ['the broker filter', `http://127.0.0.1:${filterPort}/`],
      ['the channel dispatcher', `http://${dispatcher.host}:${dispatcher.port}/`],
    ] as const) {
      await waitFor(() => reachable(url), { what: `${what} to listen at ${url}`, timeoutMs: left(), bail: earlyExit });
    }
    const controllerLog = join(logsDir, 'eventing-controllers.log');
    const reconcilers = ['broker', 'broker.trigger', 'channel', 'subscription', 'inmemorychannel.controller'];
    await waitFor(
      async () => {
        const log = await readFile(controllerLog, 'utf8');
        const missing = reconcilers.filter(
          (r) => !log.includes(`has started leading \\"controller.knative.dev.eventing.pkg.reconciler.${r}.reconciler.`),
        );
        if (missing.length > 0) throw new Error(`not yet leading: ${missing.join(', ')}`);
        return true;
      },
      {
        what: "Knative Eventing's reconcilers to lead (broker, trigger, channel, subscription, inmemorychannel)",
        timeoutMs: left(),
        bail: earlyExit,
      },
    );
    progress(`Knative Eventing ready after ${((performance.now() - started) / 1000).toFixed(1)}s (logs in ${logsDir})`);
    return {
      logsDir,
      proxyUrl: hostProxy,
      ingressUrl: (namespace, broker) => `http://127.0.0.1:${ingressPort}/${namespace}/${broker}`,
      createBroker: (namespace, name, timeoutMs = 60_000) => createBroker(admin, namespace, name, timeoutMs),
      stop: release,
    };
  } catch (err) {
    await release();
    if (err instanceof WaitTimeoutError) {
      throw new ClusterStartError(
        `knative-eventing: ${err.message} (logs in ${logsDir})`,
        components.map((c) => `last lines of ${c.name}.log:\n${logTail(c.logFile, 8)}`).join('\n'),
      );
    }
    throw err;
  }
}

/** `authentication-oidc: enabled` in config-features, as an admin turns Eventing's sender identity on. */
async function enableOidc(admin: KubeConfig): Promise<void> {
  const res = await kubeRequest(
    admin,
    'PATCH',
    `/api/v1/namespaces/${EVENTING_NAMESPACE}/configmaps/config-features`,
    { data: { 'authentication-oidc': 'enabled' } },
    'application/merge-patch+json',
  );
  if (res.status !== 200) throw new ClusterStartError(`knative-eventing: cannot enable authentication-oidc: ${JSON.stringify(res.body)}`);
}

/** A Node one-liner run inside the namespace: 127.0.0.1:<port> there is piped to <hostIp>:<port>. */
function loopbackForwardScript(port: number, hostIp: string): string {
  return [
    "const net = require('node:net');",
    `net.createServer((c) => { const u = net.connect(${port}, '${hostIp}'); c.pipe(u).pipe(c);`,
    "u.on('error', () => c.destroy()); c.on('error', () => u.destroy()); })",
    `.listen(${port}, '127.0.0.1');`,
    "process.on('SIGTERM', () => process.exit(0));",
  ].join(' ');
}

/**
 * A Broker as Eventing's webhook would default it (no webhook runs here): the MT channel-based
 * class, and config-br-default-channel (InMemoryChannel) as its channel template.
 */
async function createBroker(admin: KubeConfig, namespace: string, name: string, timeoutMs: number): Promise<void> {
  await applyManifests(
    admin,
    JSON.stringify({
      apiVersion: 'eventing.knative.dev/v1',
      kind: 'Broker',
      metadata: { name, namespace, annotations: { 'eventing.knative.dev/broker.class': 'MTChannelBasedBroker' } },
      spec: { config: { apiVersion: 'v1', kind: 'ConfigMap', name: 'config-br-default-channel', namespace: EVENTING_NAMESPACE } },
    }),
  );
  await waitFor(
    async () => {
      const res = await kubeRequest(admin, 'GET', `/apis/eventing.knative.dev/v1/namespaces/${namespace}/brokers/${name}`);
      const conditions = (res.body as { status?: { conditions?: { type: string; status: string; message?: string }[] } }).status
        ?.conditions;
      const ready = conditions?.find((c) => c.type === 'Ready');
      if (ready?.status === 'True') return true;
      throw new Error(
        `Broker ${namespace}/${name}: ${conditions?.map((c) => `${c.type}=${c.status}${c.message ? ` (${c.message})` : ''}`).join(', ') ?? 'no status yet'}`,
      );
    },
    { what: `Broker ${namespace}/${name} to be Ready`, timeoutMs },
  );
}
