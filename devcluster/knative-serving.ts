// Knative Serving's real controllers on the local control plane: its reconcilers (the set of
// cmd/controller plus the HPA-class autoscaler), its admission webhook, and the Kubernetes
// HorizontalPodAutoscaler controller they rely on, all built from the pinned Go modules by
// build-binaries.sh and configured from the same modules' manifests.
//
// What is not run, and why (the e2e suite names its stand-ins where it uses them):
// - no networking layer (Istio/Kourier/Contour): Ingresses are never programmed, so Routes and
//   Services stay Ready=Unknown unless a test marks Ingresses Ready itself;
// - no activator and no KPA autoscaler (the KPA scrapes pod IPs, which nothing may connect to
//   here): Revisions use the HPA class, and an empty `activator-service` Endpoints says "no
//   activator", which puts every ServerlessService in Serve mode;
// - no queue-proxy: pods run on kwok nodes, which mark them Running/Ready without containers.

import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { applyManifests, parseManifests } from './apply.ts';
import { BUILD_SCRIPT, cacheDir, controlPlaneBinaries, pinnedVersions } from './binaries.ts';
import { createCertificateAuthority, issueCertificate, readPem } from './certs.ts';
import type { Cluster } from './control-plane.ts';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { kubeRequest, statusMessage } from './kube-request.ts';
import { freePorts } from './ports.ts';
import { httpsGet } from './probe.ts';
import { type Component, type ComponentSpec, describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { WaitTimeoutError, waitFor } from './wait.ts';

export const KNATIVE_NAMESPACE = 'knative-serving';
/** The queue-proxy image Knative puts in every pod: in dev.local, so no registry is asked for a digest. */
export const QUEUE_SIDECAR_IMAGE = `dev.local/knative-serving/queue:${pinnedVersions().KNATIVE_SERVING_VERSION}`;
/** Identity of Knative's controller and webhook: the ServiceAccount its manifests bind to its ClusterRoles. */
export const KNATIVE_CONTROLLER_USER = `system:serviceaccount:${KNATIVE_NAMESPACE}:controller`;
const CONTROLLER_GROUPS = ['system:serviceaccounts', `system:serviceaccounts:${KNATIVE_NAMESPACE}`, 'system:authenticated'];

export interface KnativeServing {
  /** One <component>.log per process, the webhook's pki/, kubeconfigs. */
  logsDir: string;
  /** Base URL of Knative's admission webhook, e.g. https://127.0.0.1:41234. */
  webhookUrl: string;
  /** Log file of the Knative reconcilers (their JSON lines name each Revision they reconcile). */
  controllerLog: string;
  /** Deletes the url-based webhook configurations (so nothing calls a dead webhook), then stops every process. */
  stop(): Promise<void>;
}

export interface StartKnativeServingOptions {
  /** Default: <cluster.dir>/knative-serving. */
  logsDir?: string;
  /** Deadline for the whole start; default 90 s. */
  timeoutMs?: number;
  progress?: (line: string) => void;
  /** Extra data merged into Knative's ConfigMaps, by ConfigMap name (e.g. config-autoscaler). */
  configOverrides?: Record<string, Record<string, string>>;
}

interface ServingArtifacts {
  controllers: string;
  webhook: string;
  config: string;
}

function servingArtifacts(): ServingArtifacts {
  const version = pinnedVersions().KNATIVE_SERVING_VERSION;
  if (!version) throw new ClusterStartError('devcluster/versions.env has no KNATIVE_SERVING_VERSION');
  const dir = join(cacheDir(), 'bin', `knative-serving-${version}`);
  const artifacts = { controllers: join(dir, 'serving-controllers'), webhook: join(dir, 'webhook'), config: join(dir, 'config') };
  const missing = [artifacts.controllers, artifacts.webhook, join(artifacts.config, 'caching', 'image.yaml')].filter((p) => !existsSync(p));
  if (missing.length > 0) {
    throw new ClusterStartError(
      `missing Knative Serving ${version} build output (${missing.join(', ')}): run ${BUILD_SCRIPT} knative-serving`,
    );
  }
  return artifacts;
}

/**
 * Knative's ConfigMaps as its module ships them, with what this host needs: a queue-proxy image
 * that needs no registry, and tag resolution skipped for dev.local (already Knative's default,
 * set here so the suite does not depend on it).
 */
async function configMaps(config: string, overrides: Record<string, Record<string, string>>): Promise<string> {
  const sources = [
    ...['autoscaler', 'defaults', 'deployment', 'domain', 'features', 'gc', 'leader-election', 'logging', 'observability', 'tracing'].map(
      (n) => join(config, 'core', 'configmaps', `${n}.yaml`),
    ),
    join(config, 'networking', 'config-network.yaml'),
  ];
  const wanted: Record<string, Record<string, string>> = {
    'config-deployment': {
      'queue-sidecar-image': QUEUE_SIDECAR_IMAGE,
      'registries-skipping-tag-resolving': 'kind.local,ko.local,dev.local',
    },
  };
  for (const [name, data] of Object.entries(overrides)) wanted[name] = { ...wanted[name], ...data };
  const docs: string[] = [];
  for (const file of sources) {
    for (const m of parseManifests(await readFile(file, 'utf8'))) {
      const cm = m as typeof m & { data?: Record<string, string> };
      const name = cm.metadata?.name ?? '';
      docs.push(JSON.stringify({ ...cm, data: { ...cm.data, ...wanted[name] } }));
    }
  }
  return docs.join('\n---\n');
}

/**
 * Knative's own webhook configurations, pointed at the webhook's URL on 127.0.0.1 (the
 * apiserver cannot reach a Service here). Each webhook entry gets a name other than its
 * configuration's: Knative's webhook reconcilers rewrite only the entry named like the
 * configuration, and would stop at "missing service reference" on a url-based one.
 */
async function webhookConfigurations(config: string, urlBase: string, caBundle: string): Promise<string> {
  const paths: Record<string, string> = {
    'defaulting.yaml': '/defaulting',
    'resource-validation.yaml': '/resource-validation',
    'configmap-validation.yaml': '/config-validation',
  };
  const docs: string[] = [];
  for (const [file, path] of Object.entries(paths)) {
    for (const m of parseManifests(await readFile(join(config, 'core', 'webhooks', file), 'utf8'))) {
      const wh = m as typeof m & { webhooks: { name: string; clientConfig: object }[] };
      wh.webhooks = wh.webhooks.map((w) => ({
        ...w,
        name: `url.${w.name}`,
        clientConfig: { url: `${urlBase}${path}`, caBundle: Buffer.from(caBundle).toString('base64') },
      }));
      docs.push(JSON.stringify(wh));
    }
  }
  return docs.join('\n---\n');
}

const WEBHOOK_CONFIGURATIONS = [
  ['mutatingwebhookconfigurations', 'webhook.serving.knative.dev'],
  ['validatingwebhookconfigurations', 'validation.webhook.serving.knative.dev'],
  ['validatingwebhookconfigurations', 'config.webhook.serving.knative.dev'],
] as const;

/**
 * Whether Knative's webhook answers for real: a dry-run Service comes back defaulted by it (the
 * host-process install here and the pod install in knative-serving-pods.ts wait for this).
 */
export async function webhookDefaults(admin: KubeConfig): Promise<boolean> {
  const res = await kubeRequest(admin, 'POST', '/apis/serving.knative.dev/v1/namespaces/default/services?dryRun=All', {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Service',
    metadata: { name: 'webhook-probe' },
    spec: { template: { spec: { containers: [{ image: 'dev.local/probe:v1' }] } } },
  });
  if (res.status !== 201 && res.status !== 200) throw new Error(`HTTP ${res.status}: ${statusMessage(res)}`);
  const svc = res.body as { spec?: { template?: { spec?: { timeoutSeconds?: number } } } };
  return svc.spec?.template?.spec?.timeoutSeconds !== undefined;
}

/** Knative's webhook configurations (they fail closed): gone before its webhook stops, here and in knative-serving-pods.ts. */
export async function deleteWebhookConfigurations(kc: KubeConfig): Promise<void> {
  await Promise.all(
    WEBHOOK_CONFIGURATIONS.map(([plural, name]) =>
      kubeRequest(kc, 'DELETE', `/apis/admissionregistration.k8s.io/v1/${plural}/${name}`).catch(() => undefined),
    ),
  );
}

export async function startKnativeServing(cluster: Cluster, opts: StartKnativeServingOptions = {}): Promise<KnativeServing> {
  const started = performance.now();
  const progress = opts.progress ?? (() => {});
  const deadline = Date.now() + (opts.timeoutMs ?? 90_000);
  const left = () => Math.max(deadline - Date.now(), 1);
  const artifacts = servingArtifacts();
  const kcmBinary = controlPlaneBinaries().kubeControllerManager;
  const logsDir = opts.logsDir ?? join(cluster.dir, 'knative-serving');
  await mkdir(logsDir, { recursive: true });
  const admin = cluster.kubeConfig;
  const config = artifacts.config;

  // Knative's manifests: namespace, CRDs (its own, and those of knative.dev/networking and
  // knative.dev/caching it watches: without them its informers never sync), RBAC, ConfigMaps.
  await applyManifests(admin, join(config, 'core', '100-namespace.yaml'));
  for (const source of [
    join(config, 'core', '300-resources'),
    ...['certificate', 'domain-claim', 'ingress', 'serverlessservice'].map((n) => join(config, 'networking', `${n}.yaml`)),
    join(config, 'caching', 'image.yaml'),
    join(config, 'core', '200-roles'),
    join(config, 'core', '200-serviceaccount.yaml'),
  ]) {
    await applyManifests(admin, source, { timeoutMs: left() });
  }
  await applyManifests(admin, await configMaps(config, opts.configOverrides ?? {}), { namespace: KNATIVE_NAMESPACE });
  // No activator runs: its Service has no endpoints, so ServerlessServices serve from the pods.
  await applyManifests(
    admin,
    [
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'activator-service', namespace: KNATIVE_NAMESPACE },
        spec: { ports: [{ name: 'http', port: 80 }] },
      },
      { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'activator-service', namespace: KNATIVE_NAMESPACE } },
    ]
      .map((o) => JSON.stringify(o))
      .join('\n---\n'),
  );

  // The webhook serves the certificate in Secret webhook-certs. Knative would generate one for
  // its Service's DNS name; the apiserver calls 127.0.0.1, so give it one with that IP SAN
  // (Knative's certificate reconciler keeps a valid certificate it finds there).
  const pki = join(logsDir, 'pki');
  const ca = await createCertificateAuthority(pki, 'webhook-ca', 'knative-serving-webhook-ca');
  const serving = await issueCertificate(ca, pki, 'webhook', {
    commonName: `webhook.${KNATIVE_NAMESPACE}.svc`,
    server: { ips: ['127.0.0.1'], dnsNames: [`webhook.${KNATIVE_NAMESPACE}.svc`, `webhook.${KNATIVE_NAMESPACE}.svc.cluster.local`] },
  });
  const caPem = await readFile(ca.certFile, 'utf8');
  const { certPem, keyPem } = await readPem(serving);
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  await applyManifests(
    admin,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'webhook-certs', namespace: KNATIVE_NAMESPACE },
      data: { 'server-key.pem': b64(keyPem), 'server-cert.pem': b64(certPem), 'ca-cert.pem': b64(caPem) },
    }),
  );

  const [controllerKubeconfig, kcmKubeconfig] = await Promise.all([
    cluster.mintUserKubeconfig(KNATIVE_CONTROLLER_USER, CONTROLLER_GROUPS),
    cluster.mintUserKubeconfig('system:kube-controller-manager'),
  ]);
  const [webhookPort, webhookProfilingPort, controllerProfilingPort] = (await freePorts(3)) as [number, number, number];
  const webhookUrl = `https://127.0.0.1:${webhookPort}`;
  const knativeEnv = (component: string, profilingPort: number): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    // No ~/.docker or ~/.kube of the user leaks in.
    HOME: logsDir,
    SYSTEM_NAMESPACE: KNATIVE_NAMESPACE,
    POD_NAME: `${component}-${process.pid}`,
    CONFIG_LOGGING_NAME: 'config-logging',
    CONFIG_OBSERVABILITY_NAME: 'config-observability',
    METRICS_DOMAIN: 'knative.dev/serving',
    // The pprof server always listens (on every interface, Knative's choice); give each its own port.
    PROFILING_PORT: String(profilingPort),
  });
  const specs: ComponentSpec[] = [
    {
      name: 'knative-webhook',
      command: artifacts.webhook,
      args: [`--kubeconfig=${controllerKubeconfig}`],
      env: { ...knativeEnv('webhook', webhookProfilingPort), WEBHOOK_NAME: 'webhook', WEBHOOK_PORT: String(webhookPort) },
    },
    {
      name: 'knative-controller',
      command: artifacts.controllers,
      args: [`--kubeconfig=${controllerKubeconfig}`],
      env: knativeEnv('controller', controllerProfilingPort),
    },
    // The HPA class needs Kubernetes' HorizontalPodAutoscaler controller: Knative's HPA
    // reconciler counts the PodAutoscaler initialised once the HPA reports the Deployment's
    // replicas. A second kube-controller-manager running only that controller, so the shared
    // control plane stays as it is; it syncs every second instead of 15 s, so a Revision's
    // time to Ready measures Knative and the gate, not this poll.
    {
      name: 'kube-controller-manager-hpa',
      command: kcmBinary,
      args: [
        `--kubeconfig=${kcmKubeconfig}`,
        '--controllers=horizontal-pod-autoscaler-controller',
        '--use-service-account-credentials=true',
        '--horizontal-pod-autoscaler-sync-period=1s',
        '--leader-elect=false',
        '--secure-port=0',
      ],
    },
  ];

  const components: Component[] = [];
  let stopping = false;
  const unregisterExitHook = onExit(() => {
    stopping = true;
    for (const c of components) signalGroup(c.pid, 'SIGKILL');
  });
  const earlyExit = (): Error | undefined => {
    const dead = components.find((c) => c.exitInfo !== undefined);
    if (!dead?.exitInfo) return undefined;
    return new ClusterStartError(
      `knative-serving: ${dead.name} ${describeExit(dead.exitInfo)} during start (full log: ${dead.logFile})`,
      `last lines of ${dead.name}.log:\n${logTail(dead.logFile)}`,
    );
  };
  let running = false;
  for (const spec of specs) {
    const c = startComponent(spec, logsDir);
    components.push(c);
    void c.exited.then((info) => {
      if (!stopping && running) {
        process.stderr.write(
          `knative-serving: ${c.name} ${describeExit(info)} while running; last lines of ${c.logFile}:\n${logTail(c.logFile, 10)}\n`,
        );
      }
    });
  }
  const fail = async (err: unknown): Promise<never> => {
    stopping = true;
    await deleteWebhookConfigurations(admin);
    await stopComponents(components, 3000);
    unregisterExitHook();
    if (err instanceof WaitTimeoutError) {
      throw new ClusterStartError(
        `knative-serving: ${err.message} (logs in ${logsDir})`,
        components.map((c) => `last lines of ${c.name}.log:\n${logTail(c.logFile, 8)}`).join('\n'),
      );
    }
    throw err;
  };

  try {
    await waitFor(() => httpsGet(`${webhookUrl}/`, { ca: caPem }).then(() => true), {
      what: `Knative's webhook to serve TLS at ${webhookUrl}`,
      timeoutMs: left(),
      bail: earlyExit,
    });
    await applyManifests(admin, await webhookConfigurations(config, webhookUrl, caPem));
    // The webhook answers for real: a dry-run Service comes back defaulted by it.
    await waitFor(() => webhookDefaults(admin), {
      what: "Knative's webhook to default a dry-run Service",
      timeoutMs: left(),
      bail: earlyExit,
    });
    // Leader election: the reconcilers act once they lead their buckets, after their caches
    // synced. Their identity is the host name plus a random id, so read it from their own log.
    const controllerLog = join(logsDir, 'knative-controller.log');
    const reconcilers = ['revision', 'configuration', 'route', 'service', 'serverlessservice', 'autoscaling.hpa'];
    await waitFor(
      async () => {
        const log = await readFile(controllerLog, 'utf8');
        const missing = reconcilers.filter(
          (r) => !log.includes(`has started leading \\"controller.knative.dev.serving.pkg.reconciler.${r}.reconciler.`),
        );
        if (missing.length > 0) throw new Error(`not yet leading: ${missing.join(', ')}`);
        return true;
      },
      {
        what: "Knative's reconcilers to lead (revision, configuration, route, service, serverlessservice, hpa)",
        timeoutMs: left(),
        bail: earlyExit,
      },
    );
  } catch (err) {
    return fail(err);
  }
  running = true;
  progress(`Knative Serving ready after ${((performance.now() - started) / 1000).toFixed(1)}s (logs in ${logsDir})`);

  let stopped: Promise<void> | undefined;
  return {
    logsDir,
    webhookUrl,
    controllerLog: join(logsDir, 'knative-controller.log'),
    stop: () => {
      stopped ??= (async () => {
        stopping = true;
        await deleteWebhookConfigurations(admin);
        await stopComponents(components, 5000);
        unregisterExitHook();
      })();
      return stopped;
    },
  };
}
