// Knative Eventing's ApiServerSource on the local control plane: its real reconciler, and its real
// receive adapter run as a local process. Needs startKnativeEventing first (the CRDs, RBAC,
// configmaps and the service proxy).
//
// The stand-in, and why: the reconciler writes the adapter's Deployment as in any cluster, but no
// kubelet runs here (kwok only marks its pod Ready), so nothing would ever run the adapter. This
// file reads that Deployment's container env, exactly what the reconciler computed (sink URI,
// resources and selectors, namespace, observability config), and starts the adapter binary with
// it as a process on this host, with the source's ServiceAccount identity (a minted client
// certificate, as in-cluster it would be the pod's token) and the service proxy for the sink's
// cluster-local address (docs/testing.md). Both binaries are mains of ours around the upstream
// code, only to turn off health probes on the fixed port :8080 (their comments say more).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import type { Cluster } from './control-plane.ts';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { EVENTING_NAMESPACE, type KnativeEventing } from './knative-eventing.ts';
import { kubeRequest } from './kube-request.ts';
import { freePorts } from './ports.ts';
import { type Component, describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { waitFor } from './wait.ts';

export interface ApiServerSources {
  /**
   * Waits until the reconciler has written the adapter Deployment of ApiServerSource `name`, then
   * runs the adapter it describes; resolves once the adapter process is up.
   */
  runAdapter(namespace: string, name: string, timeoutMs?: number): Promise<{ logFile: string }>;
  stop(): Promise<void>;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}

interface Deployment {
  metadata: { name: string };
  spec: { template: { spec: { serviceAccountName?: string; containers: { name: string; env?: EnvVar[] }[] } } };
}

function binaries(): { controller: string; adapter: string } {
  const version = pinnedVersions().KNATIVE_EVENTING_VERSION;
  const dir = join(cacheDir(), 'bin', `knative-eventing-${version}`);
  const b = { controller: join(dir, 'apiserversource-controller'), adapter: join(dir, 'apiserversource-adapter') };
  const missing = Object.values(b).filter((p) => !existsSync(p));
  if (missing.length > 0) throw new ClusterStartError(`missing ${missing.join(', ')}: run ${BUILD_SCRIPT} knative-eventing`);
  return b;
}

export async function startApiServerSources(cluster: Cluster, eventing: KnativeEventing): Promise<ApiServerSources> {
  const bin = binaries();
  const version = pinnedVersions().KNATIVE_EVENTING_VERSION;
  const logsDir = eventing.logsDir;
  const components: Component[] = [];
  let stopping = false;
  const unregister = onExit(() => {
    for (const c of components) signalGroup(c.pid, 'SIGKILL');
  });
  const start = (spec: Parameters<typeof startComponent>[0]): Component => {
    const c = startComponent(spec, logsDir);
    components.push(c);
    void c.exited.then((info) => {
      if (!stopping)
        process.stderr.write(`apiserversource: ${c.name} ${describeExit(info)}; last lines of ${c.logFile}:\n${logTail(c.logFile, 10)}\n`);
    });
    return c;
  };
  const baseEnv = (component: string, profilingPort: number): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    HOME: logsDir,
    SYSTEM_NAMESPACE: EVENTING_NAMESPACE,
    POD_NAME: `${component}-${process.pid}`,
    CONTAINER_NAME: component,
    PROFILING_PORT: String(profilingPort),
    HTTP_PROXY: eventing.proxyUrl,
    HTTPS_PROXY: eventing.proxyUrl,
  });

  const [profiling] = (await freePorts(1)) as [number];
  const controllerKc = await cluster.mintUserKubeconfig(`system:serviceaccount:${EVENTING_NAMESPACE}:eventing-controller`, [
    'system:serviceaccounts',
    `system:serviceaccounts:${EVENTING_NAMESPACE}`,
    'system:authenticated',
  ]);
  const controller = start({
    name: 'apiserversource-controller',
    command: bin.controller,
    args: [`--kubeconfig=${controllerKc}`],
    env: {
      ...baseEnv('apiserversource-controller', profiling),
      CONFIG_LOGGING_NAME: 'config-logging',
      CONFIG_OBSERVABILITY_NAME: 'config-observability',
      METRICS_DOMAIN: 'knative.dev/eventing',
      // What the reconciler writes into the adapter Deployments (cmd/controller's env in Eventing's manifests).
      APISERVER_RA_IMAGE: `dev.local/knative-eventing/apiserver-receive-adapter:${version}`,
    },
  });
  const stop = async () => {
    stopping = true;
    await stopComponents(components, 5000);
    unregister();
  };
  try {
    await waitFor(
      () => {
        if (controller.exitInfo)
          throw new ClusterStartError(`apiserversource-controller ${describeExit(controller.exitInfo)}`, logTail(controller.logFile));
        return logTail(controller.logFile, 400).includes('apiserversource.reconciler');
      },
      { what: 'the ApiServerSource reconciler to start', timeoutMs: 60_000 },
    );
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    async runAdapter(namespace, name, timeoutMs = 60_000) {
      const deployment = await waitFor(
        async () => {
          const res = await kubeRequest(
            cluster.kubeConfig,
            'GET',
            `/apis/apps/v1/namespaces/${namespace}/deployments?labelSelector=${encodeURIComponent(`eventing.knative.dev/source=apiserver-source-controller,eventing.knative.dev/sourceName=${name}`)}`,
          );
          return (res.body as { items?: Deployment[] }).items?.[0];
        },
        { what: `the adapter Deployment of ApiServerSource ${namespace}/${name}`, timeoutMs },
      );
      const pod = deployment.spec.template.spec;
      const container = pod.containers[0];
      if (!container) throw new Error(`Deployment ${deployment.metadata.name} has no container`);
      const env: NodeJS.ProcessEnv = {};
      for (const e of container.env ?? []) {
        if (e.value !== undefined) env[e.name] = e.value;
        else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = namespace;
        else throw new Error(`adapter env ${e.name}: only values and the pod's namespace are supported here`);
      }
      const sa = pod.serviceAccountName ?? 'default';
      const kc = await cluster.mintUserKubeconfig(`system:serviceaccount:${namespace}:${sa}`, [
        'system:serviceaccounts',
        `system:serviceaccounts:${namespace}`,
        'system:authenticated',
      ]);
      const [port] = (await freePorts(1)) as [number];
      const adapter = start({
        name: `apiserversource-adapter-${namespace}-${name}`,
        command: bin.adapter,
        args: [`--kubeconfig=${kc}`],
        env: { ...baseEnv(`adapter-${name}`, port), ...env, KUBECONFIG: kc },
      });
      await waitFor(
        () => {
          if (adapter.exitInfo) throw new Error(`the adapter ${describeExit(adapter.exitInfo)}: ${logTail(adapter.logFile)}`);
          return logTail(adapter.logFile, 400).includes('Starting');
        },
        { what: `the adapter of ${namespace}/${name} to start`, timeoutMs },
      );
      return { logFile: adapter.logFile };
    },
    stop,
  };
}
