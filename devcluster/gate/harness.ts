// A gate running in this process against the shared real control plane, scoped to one
// namespace of its own so test files (and benches) can run side by side. The gate talks to the apiserver as
// its real service-account identity (a minted client certificate), bound by config/300-rbac.yaml,
// so the RBAC and the policies are exercised as installed.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  type CoreV1Event,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import pino from 'pino';
import type { RevisionObject, RunObject } from '../../api/resources.ts';
import { HOLD_LABEL, type PrestartHookSpec } from '../../api/types.ts';
import type { GateConfig } from '../../gate/config.ts';
import { type RunningGate, startGate } from '../../gate/gate.ts';
import { webhookConfigurationName } from '../../gate/webhooks/tls.ts';
import { applyManifests } from '../apply.ts';
import type { Cluster } from '../control-plane.ts';
import { knativeServingCrdDir } from '../knative.ts';
import { sharedCluster } from '../shared.ts';
import { waitFor } from '../wait.ts';

export const GATE_USER = 'system:serviceaccount:knative-prestart:knative-prestart-gate';
export const GATE_GROUPS = ['system:serviceaccounts', 'system:serviceaccounts:knative-prestart', 'system:authenticated'];
const configDir = fileURLToPath(new URL('../../config/', import.meta.url));

let installed: Promise<Cluster> | undefined;

/** Knative's CRDs and the project's manifests, applied once per process (idempotent). */
export function installedCluster(): Promise<Cluster> {
  installed ??= (async () => {
    const cluster = await sharedCluster();
    await applyManifests(cluster.kubeConfig, await knativeServingCrdDir());
    // The CRDs, the hold policies and RBAC as installed; not 400-webhooks/500-gate, which point
    // at an in-cluster Service: each test gate registers its own url-based configuration.
    for (const file of ['100-prestarthook-crd.yaml', '100-prestartrun-crd.yaml', '200-hold-policy.yaml', '300-rbac.yaml']) {
      await applyManifests(cluster.kubeConfig, `${configDir}${file}`);
    }
    return cluster;
  })();
  return installed;
}

export interface GateEnv {
  cluster: Cluster;
  admin: KubeConfig;
  namespace: string;
  instance: string;
  gate: RunningGate;
  /** Where the gate's identity kubeconfig is (for gates run as processes). */
  gateKubeconfigPath: string;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  apps: AppsV1Api;
  /**
   * Starts (or restarts, after stopGate) the gate for this namespace; `overrides` (e.g. Triggers
   * and Broker settings) are kept for later restarts.
   */
  startGate(overrides?: Partial<GateConfig>): Promise<RunningGate>;
  stop(): Promise<void>;
}

const instanceRbacName = (instance: string) => `knative-prestart-gate-webhook-${instance}`;

/**
 * What an admin adds for a second gate instance (config/300-rbac.yaml limits update/patch of the
 * webhook configuration by name): the right to write the one named after this instance.
 */
async function grantInstanceWebhook(admin: KubeConfig, instance: string): Promise<void> {
  const name = instanceRbacName(instance);
  await applyManifests(
    admin,
    [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name },
        rules: [
          {
            apiGroups: ['admissionregistration.k8s.io'],
            resources: ['mutatingwebhookconfigurations'],
            resourceNames: [webhookConfigurationName(instance)],
            verbs: ['update', 'patch'],
          },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name },
        subjects: [{ kind: 'ServiceAccount', name: 'knative-prestart-gate', namespace: 'knative-prestart' }],
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      },
    ]
      .map((o) => JSON.stringify(o))
      .join('\n---\n'),
  );
}

/** A namespace of its own and, unless `inProcess` is false, a gate running in this process. */
export async function gateEnv(name: string, { inProcess = true, nats }: { inProcess?: boolean; nats?: string } = {}): Promise<GateEnv> {
  const cluster = await installedCluster();
  const admin = cluster.kubeConfig;
  const instance = `${name}-${randomBytes(3).toString('hex')}`;
  const namespace = instance;
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace, labels: { 'prestart.dev/gate': instance } } } });
  await grantInstanceWebhook(admin, instance);
  const gateKubeconfigPath = await cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS);
  const gateKc = new KubeConfig();
  gateKc.loadFromFile(gateKubeconfigPath);
  let kept: Partial<GateConfig> = {};
  const env: GateEnv = {
    cluster,
    admin,
    namespace,
    instance,
    gate: undefined as unknown as RunningGate,
    gateKubeconfigPath,
    custom: admin.makeApiClient(CustomObjectsApi),
    core,
    apps: admin.makeApiClient(AppsV1Api),
    async startGate(overrides) {
      if (overrides) kept = overrides;
      env.gate = await startGate(
        {
          kubeConfig: gateKc,
          namespace: 'knative-prestart',
          instance,
          identity: `${instance}-${process.pid}-${randomBytes(2).toString('hex')}`,
          namespaceSelector: `prestart.dev/gate=${instance}`,
          webhook: { host: '127.0.0.1', port: 0, bindingRoot: '/bindings' },
          sink: { host: '127.0.0.1', port: 0, maxBytes: 64 * 1024 },
          source: `/apis/prestart.dev/v1alpha1/gate/${instance}`,
          workers: 4,
          ...(nats ? { nats: { servers: nats } } : {}),
          ...kept,
        },
        pino({ name: instance, level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
      );
      await waitFor(() => env.gate.isLeader(), { timeoutMs: 30_000, what: `gate ${instance} to lead` });
      return env.gate;
    },
    async stop() {
      await env.gate?.stop().catch(() => undefined);
      await core.deleteNamespace({ name: namespace }).catch(() => undefined);
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      await rbac.deleteClusterRoleBinding({ name: instanceRbacName(instance) }).catch(() => undefined);
      await rbac.deleteClusterRole({ name: instanceRbacName(instance) }).catch(() => undefined);
    },
  };
  if (inProcess) await env.startGate();
  return env;
}

export function hookSpec(overrides: Partial<PrestartHookSpec> & Pick<PrestartHookSpec, 'delivery'>, namespace: string): PrestartHookSpec {
  return {
    match: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } },
    order: 0,
    timeout: '2m',
    resendInterval: '30s',
    failurePolicy: 'Fail',
    ...overrides,
  };
}

/** A hook's match: Revisions in `namespace` that carry annotation `key` (with `value`, when given). */
export function annotationMatch(namespace: string, key: string, value?: string): PrestartHookSpec['match'] {
  return {
    annotation: value === undefined ? { key } : { key, value },
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
  };
}

export async function createHook(env: GateEnv, name: string, spec: PrestartHookSpec): Promise<void> {
  await env.custom.createClusterCustomObject({
    group: 'prestart.dev',
    version: 'v1alpha1',
    plural: 'prestarthooks',
    body: { apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', metadata: { name }, spec },
  });
}

export async function deleteHook(env: GateEnv, name: string): Promise<void> {
  await env.custom
    .deleteClusterCustomObject({ group: 'prestart.dev', version: 'v1alpha1', plural: 'prestarthooks', name })
    .catch(() => undefined);
}

/**
 * Waits until the gate's admission webhook stamps a Revision carrying `annotations` with
 * `hook`: a hook created a moment ago is not in the gate's cache yet. Uses a dry-run create,
 * which runs every admission webhook and stores nothing. The probe names no Configuration:
 * Knative's own validation (when it runs, as in the e2e suite) refuses a
 * serving.knative.dev/configuration label without the matching owner reference.
 */
export async function waitUntilStamped(
  env: Pick<GateEnv, 'custom' | 'namespace'>,
  hook: string,
  annotations: Record<string, string>,
): Promise<void> {
  await waitFor(
    async () => {
      const rev = (await env.custom.createNamespacedCustomObject({
        group: 'serving.knative.dev',
        version: 'v1',
        plural: 'revisions',
        namespace: env.namespace,
        dryRun: 'All',
        body: {
          apiVersion: 'serving.knative.dev/v1',
          kind: 'Revision',
          metadata: { name: `stamp-probe-${Date.now()}`, annotations },
          spec: { containers: [{ image: 'dev.local/demo/app:v1' }] },
        },
      })) as RevisionObject;
      return (JSON.parse(rev.metadata?.annotations?.['prestart.dev/hooks'] ?? '[]') as string[]).includes(hook);
    },
    { timeoutMs: 30_000, what: `the gate's webhook to apply hook ${hook}` },
  );
}

/** Creates a Revision the way Knative's configuration controller does (labels included). */
export async function createRevision(
  env: GateEnv,
  name: string,
  opts: {
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    configuration?: string;
    generation?: number;
    kc?: KubeConfig;
  } = {},
): Promise<RevisionObject> {
  const api = (opts.kc ?? env.admin).makeApiClient(CustomObjectsApi);
  return (await api.createNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'revisions',
    namespace: env.namespace,
    body: revisionBody(env, name, opts),
  })) as RevisionObject;
}

function revisionBody(
  env: GateEnv,
  name: string,
  opts: { annotations?: Record<string, string>; labels?: Record<string, string>; configuration?: string; generation?: number },
): object {
  const configuration = opts.configuration ?? name.replace(/-\d+$/, '');
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Revision',
    metadata: {
      name,
      namespace: env.namespace,
      labels: {
        'serving.knative.dev/configuration': configuration,
        'serving.knative.dev/configurationGeneration': String(opts.generation ?? 1),
        'serving.knative.dev/service': configuration,
        ...opts.labels,
      },
      annotations: opts.annotations ?? {},
    },
    spec: { containers: [{ image: 'dev.local/demo/app:v1', name: 'user-container' }] },
  };
}

export async function getRevision(env: GateEnv, name: string): Promise<RevisionObject> {
  return (await env.custom.getNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'revisions',
    namespace: env.namespace,
    name,
  })) as RevisionObject;
}

export async function getRun(env: GateEnv, name: string): Promise<RunObject | undefined> {
  try {
    return (await env.custom.getNamespacedCustomObject({
      group: 'prestart.dev',
      version: 'v1alpha1',
      plural: 'prestartruns',
      namespace: env.namespace,
      name,
    })) as RunObject;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

export function waitForRun(
  env: GateEnv,
  name: string,
  what: string,
  ok: (run: RunObject) => boolean,
  timeoutMs = 30_000,
): Promise<RunObject> {
  return waitFor(
    async () => {
      const run = await getRun(env, name);
      return run && ok(run) ? run : undefined;
    },
    { timeoutMs, what: `PrestartRun ${name}: ${what}` },
  );
}

/** The gate's hold label, as `kubectl get revision -L prestart.dev/hold` shows it. */
export const isHeld = (rev: KubernetesObject | undefined): boolean => rev?.metadata?.labels?.[HOLD_LABEL] === 'true';

/** Tries to create the Deployment Knative would create for the Revision: its labels and annotations, copied. */
export async function createDeploymentLikeKnative(
  env: GateEnv,
  rev: RevisionObject,
): Promise<{ created: true } | { created: false; status: number; message: string }> {
  const md = rev.metadata ?? {};
  const labels = { ...(md.labels ?? {}), 'serving.knative.dev/revision': md.name ?? '', 'serving.knative.dev/revisionUID': md.uid ?? '' };
  try {
    await env.apps.createNamespacedDeployment({
      namespace: env.namespace,
      body: {
        metadata: { name: `${md.name}-deployment`, namespace: env.namespace, labels, annotations: md.annotations ?? {} },
        spec: {
          replicas: 1,
          selector: { matchLabels: { 'serving.knative.dev/revisionUID': md.uid ?? '' } },
          template: {
            metadata: { labels, annotations: md.annotations ?? {} },
            spec: {
              containers: [
                { name: 'user-container', image: 'dev.local/demo/app:v1' },
                { name: 'queue-proxy', image: 'dev.local/queue:v1' },
              ],
            },
          },
        },
      },
    });
    return { created: true };
  } catch (err) {
    if (err instanceof ApiException) {
      const body = typeof err.body === 'string' ? safeJson(err.body) : err.body;
      return { created: false, status: err.code, message: (body as { message?: string } | undefined)?.message ?? String(err.body) };
    }
    throw err;
  }
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return { message: s };
  }
}

export async function revisionEvents(env: GateEnv, name: string): Promise<CoreV1Event[]> {
  const list = await env.core.listNamespacedEvent({ namespace: env.namespace, fieldSelector: `involvedObject.name=${name}` });
  return list.items;
}

export async function annotateRun(env: GateEnv, name: string, annotations: Record<string, string>, kc?: KubeConfig): Promise<void> {
  const api = (kc ?? env.admin).makeApiClient(CustomObjectsApi);
  await api.patchNamespacedCustomObject(
    {
      group: 'prestart.dev',
      version: 'v1alpha1',
      plural: 'prestartruns',
      namespace: env.namespace,
      name,
      body: { metadata: { annotations } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

// ---- hook services: real HTTP servers on 127.0.0.1 ----

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  body: string;
  ceId: string;
  data: { action: string; attempt: number; replyTo?: string; revision: { name: string }; hook: { name: string } };
  correlationid: string;
}

export interface HookServer {
  url: string;
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

/**
 * A hook service. `answer` decides the HTTP answer for each request: a status and optional
 * headers/body (e.g. 200 with a completed CloudEvent), after any async work it wants.
 */
export async function startHookServer(
  answer: (req: ReceivedRequest) => Promise<{ status: number; headers?: Record<string, string>; body?: string }>,
): Promise<HookServer> {
  const requests: ReceivedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const received: ReceivedRequest = {
        headers: req.headers,
        body,
        ceId: String(req.headers['ce-id'] ?? ''),
        data: JSON.parse(body || '{}'),
        correlationid: String(req.headers['ce-correlationid'] ?? ''),
      };
      requests.push(received);
      answer(received).then(
        (a) => {
          res.writeHead(a.status, a.headers ?? {});
          res.end(a.body ?? '');
        },
        (err: unknown) => {
          res.writeHead(500);
          res.end(String(err));
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
