// A gate running in this process against the shared real control plane, scoped to one
// namespace of its own so test files (and benches) can run side by side. The gate talks to the apiserver as
// its real service-account identity (a minted client certificate), bound by config/300-rbac.yaml,
// so the RBAC and the policies are exercised as installed. The env carries what a test does in its
// namespace (hooks.ts, revisions.ts) as methods: env.createHook(...), env.createRevision(...).
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import pino from 'pino';
import type { GateConfig } from '../../gate/config.ts';
import { type RunningGate, startGate } from '../../gate/gate.ts';
import { webhookConfigurationName } from '../../gate/webhooks/tls.ts';
import { applyManifests, servesMutatingPolicies } from '../apply.ts';
import type { Cluster } from '../control-plane.ts';
import { knativeServingCrdDir } from '../knative.ts';
import { sharedCluster } from '../shared.ts';
import { waitFor } from '../wait.ts';
import { type HookMethods, hookMethods } from './hooks.ts';
import { type RevisionMethods, revisionMethods } from './revisions.ts';
import { allowGateTriggers } from './trigger-rights.ts';

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
    // 210: the stamp policy, which the Revision webhook (failing open) relies on. 220: a released
    // Revision's pods and ReplicaSets, which the cluster's own controllers still make.
    for (const file of [
      '100-prestarthook-crd.yaml',
      '100-namespacedprestarthook-crd.yaml',
      '100-prestartrun-crd.yaml',
      '200-hold-policy.yaml',
      '210-stamp-policy.yaml',
      '211-namespaced-stamp-policy.yaml',
      '220-revision-pods-policy.yaml',
      '300-rbac.yaml',
      // Where the apiserver serves MutatingAdmissionPolicy v1 (Kubernetes >= 1.36), it stamps new
      // Revisions as the release's knative-prestart-apiserver-stamp.yaml does, and the test gates
      // register no Revision webhook; older apiservers (the compatibility matrix) keep the webhook.
      ...((await servesMutatingPolicies(cluster.kubeConfig)) ? ['230-stamp-mutating-policy.yaml'] : []),
    ]) {
      await applyManifests(cluster.kubeConfig, `${configDir}${file}`);
    }
    return cluster;
  })();
  return installed;
}

export interface GateEnv extends HookMethods, RevisionMethods {
  cluster: Cluster;
  admin: KubeConfig;
  namespace: string;
  instance: string;
  gate: RunningGate;
  /** Where the gate's identity kubeconfig is (for gates run as processes). */
  gateKubeconfigPath: string;
  /** What the in-process gate logged at its level (GATE_LOG_LEVEL, default warn), one JSON line each; also written to stderr. */
  gateLog: string[];
  custom: CustomObjectsApi;
  core: CoreV1Api;
  apps: AppsV1Api;
  /**
   * Starts (or restarts, after stopGate) the gate for this namespace; `overrides` (e.g. Triggers
   * and Broker settings) are kept for later restarts.
   */
  startGate(overrides?: Partial<GateConfig>): Promise<RunningGate>;
  /** Deletes the hooks created through the env, stops the gate, deletes the namespace. */
  stop(): Promise<void>;
}

const instanceRbacName = (instance: string) => `knative-prestart-gate-webhook-${instance}`;

/**
 * What an admin adds for a second gate instance (config/300-rbac.yaml lets the gate read and
 * update its webhook configuration by name only, and never create one): the configuration named
 * after this instance, empty until its gate fills it in, and the right to keep that one current.
 */
async function grantInstanceWebhook(admin: KubeConfig, instance: string): Promise<void> {
  const name = instanceRbacName(instance);
  await applyManifests(
    admin,
    [
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'MutatingWebhookConfiguration',
        metadata: { name: webhookConfigurationName(instance), labels: { 'app.kubernetes.io/part-of': 'knative-prestart' } },
        webhooks: [],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name },
        rules: [
          {
            apiGroups: ['admissionregistration.k8s.io'],
            resources: ['mutatingwebhookconfigurations'],
            resourceNames: [webhookConfigurationName(instance)],
            verbs: ['get', 'update', 'patch'],
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

/** A namespace of its own and, unless `inProcess` is false, a gate running in this process (with `gate` over the defaults). */
export async function gateEnv(
  name: string,
  { inProcess = true, nats, gate }: { inProcess?: boolean; nats?: string; gate?: Partial<GateConfig> } = {},
): Promise<GateEnv> {
  const cluster = await installedCluster();
  const admin = cluster.kubeConfig;
  const instance = `${name}-${randomBytes(3).toString('hex')}`;
  const namespace = instance;
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace, labels: { 'prestart.dev/gate': instance } } } });
  await grantInstanceWebhook(admin, instance);
  // The namespace doubles as the tests' Broker namespace: the gate may write Triggers there.
  await allowGateTriggers(admin, namespace);
  const gateKubeconfigPath = await cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS);
  const gateKc = new KubeConfig();
  gateKc.loadFromFile(gateKubeconfigPath);
  const { deleteCreatedHooks, ...hooks } = hookMethods(admin, namespace);
  let kept: Partial<GateConfig> = {};
  const env: GateEnv = {
    cluster,
    admin,
    namespace,
    instance,
    gate: undefined as unknown as RunningGate,
    gateKubeconfigPath,
    gateLog: [],
    custom: admin.makeApiClient(CustomObjectsApi),
    core,
    apps: admin.makeApiClient(AppsV1Api),
    ...hooks,
    ...revisionMethods(admin, namespace),
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
        pino(
          { name: instance, level: process.env.GATE_LOG_LEVEL ?? 'warn' },
          {
            write(line: string) {
              env.gateLog.push(line);
              process.stderr.write(line);
            },
          },
        ),
      );
      await waitFor(() => env.gate.isLeader(), { timeoutMs: 30_000, what: `gate ${instance} to lead` });
      return env.gate;
    },
    async stop() {
      await deleteCreatedHooks();
      await env.gate?.stop().catch(() => undefined);
      await core.deleteNamespace({ name: namespace }).catch(() => undefined);
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      await rbac.deleteClusterRoleBinding({ name: instanceRbacName(instance) }).catch(() => undefined);
      await rbac.deleteClusterRole({ name: instanceRbacName(instance) }).catch(() => undefined);
      await admin
        .makeApiClient(AdmissionregistrationV1Api)
        .deleteMutatingWebhookConfiguration({ name: webhookConfigurationName(instance) })
        .catch(() => undefined);
    },
  };
  if (inProcess) await env.startGate(gate);
  return env;
}
