// The setup the gate-pods e2e files share: a control plane of their own whose only node is the
// real one (untainted, so Knative's manifests run unchanged), Knative Serving as pods from its
// release manifests, and knative-prestart installed as the README's Install section says: the
// image of `npm run image` imported into the node's containerd (the node's "registry"),
// `release/build.ts --out DIR` (the digest pinned), `kubectl apply --server-side`, `kubectl
// rollout status`; then, when asked, the hooks file and the README's RoleBinding for the secret hook.
// Stand-in: Ingress status only (startIngressStandIn; no networking layer runs).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cacheDir, controlPlaneBinaries } from '@knative-prestart/devcluster/binaries.ts';
import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { hookMethods } from '@knative-prestart/devcluster/gate/hooks.ts';
import { startIngressStandIn } from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeServingPods, startKnativeServingPods } from '@knative-prestart/devcluster/knative-serving-pods.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { type RealNode, realNodeUnavailable, startNode } from '@knative-prestart/devcluster/node.ts';
import { CoreV1Api } from '@kubernetes/client-node';

const run = promisify(execFile);
export const GATE_NS = 'knative-prestart';
export const GATE_DEPLOYMENT = 'knative-prestart-gate';
const IMAGE_INFO = join(cacheDir(), 'images', 'knative-prestart-0.1.0.json');

export interface ImageInfo {
  reference: string;
  archive: string;
  digest: string;
}

export interface GatePodsEnv {
  cluster: Cluster;
  node: RealNode;
  /** `kubectl --kubeconfig <the cluster's> ...args`, as an admin types it; resolves to its stdout. */
  kubectl(args: string[], timeoutMs?: number): Promise<string>;
  /** Creates `name` with its own Ingress stand-in (Routes Ready, no traffic through an Ingress). */
  createNamespace(name: string): Promise<void>;
  stop(): Promise<void>;
}

export interface Installed {
  image: ImageInfo;
  releaseDir: string;
  /** Seconds from the image import to `rollout status` returning. */
  installSeconds: number;
}

/** Throws the one-line reason when this host cannot run the real node or the image is not built. */
export function checkPrerequisites(): void {
  const unavailable = realNodeUnavailable();
  if (unavailable) throw new Error(unavailable);
  if (!existsSync(IMAGE_INFO)) throw new Error(`no image built (${IMAGE_INFO} missing): run npm run image`);
}

export async function startGatePodsEnv(opts: {
  progress: (line: string) => void;
  /** Data merged into Knative's ConfigMaps by name. */
  servingConfig?: Record<string, Record<string, string>>;
}): Promise<GatePodsEnv> {
  checkPrerequisites();
  const stops: (() => unknown)[] = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s();
  };
  try {
    const cluster = await startCluster({ nodes: 0, progress: opts.progress });
    stops.push(() => cluster.stop());
    const node = await startNode(cluster, { taint: false, progress: opts.progress });
    stops.push(() => node.stop());
    const serving: KnativeServingPods = await startKnativeServingPods(cluster, node, {
      progress: opts.progress,
      ...(opts.servingConfig ? { configOverrides: opts.servingConfig } : {}),
    });
    stops.push(() => serving.stop());
    // The gate's webhooks fail closed for Deployments and Pods: once its pods are gone with the
    // node, nothing may call them, or the node's own teardown would be refused.
    stops.push(() =>
      kubeRequest(
        cluster.kubeConfig,
        'DELETE',
        '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/knative-prestart',
      ).catch(() => undefined),
    );
    const kubectlPath = controlPlaneBinaries().kubectl;
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    return {
      cluster,
      node,
      async kubectl(args, timeoutMs = 60_000) {
        const { stdout } = await run(kubectlPath, ['--kubeconfig', cluster.kubeconfigPath, ...args], { timeout: timeoutMs });
        return stdout;
      },
      async createNamespace(name) {
        await core.createNamespace({ body: { metadata: { name } } });
        const ingress = startIngressStandIn(cluster.kubeConfig, name);
        stops.push(() => ingress.stop());
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The README's Install step 1 for the real node: the image imported into its containerd, the release file written. */
export async function buildRelease(env: GatePodsEnv): Promise<Omit<Installed, 'installSeconds'>> {
  const image = JSON.parse(readFileSync(IMAGE_INFO, 'utf8')) as ImageInfo;
  await env.node.importImages([{ archive: image.archive, ref: image.reference, digest: image.digest }]);
  const releaseDir = mkdtempSync(join(tmpdir(), 'knative-prestart-release-'));
  await run(process.execPath, ['--import', 'tsx', 'release/build.ts', '--out', releaseDir], { timeout: 60_000 });
  return { image, releaseDir };
}

/** The README's Install steps 1 and 2 on the real node; `rollout status` returns once both replicas are Ready. */
export async function installRelease(env: GatePodsEnv): Promise<Installed> {
  const t0 = performance.now();
  const built = await buildRelease(env);
  await env.kubectl(['apply', '--server-side', '-f', join(built.releaseDir, 'knative-prestart.yaml')]);
  await rolloutStatus(env, GATE_DEPLOYMENT);
  return { ...built, installSeconds: (performance.now() - t0) / 1000 };
}

/** The README's Install step 3 for the secret hook: the hooks file, and the RoleBinding in each namespace it serves. */
export async function installSecretHook(env: GatePodsEnv, installed: { releaseDir: string }, namespaces: string[]): Promise<void> {
  await env.kubectl(['apply', '--server-side', '-f', join(installed.releaseDir, 'knative-prestart-hooks.yaml')]);
  for (const ns of namespaces) {
    await env.kubectl([
      'create',
      'rolebinding',
      'prestart-hook-secret',
      '-n',
      ns,
      '--clusterrole=knative-prestart-hook-secret-namespace',
      '--serviceaccount=knative-prestart:prestart-hook-secret',
    ]);
  }
  await rolloutStatus(env, 'prestart-hook-secret');
}

/**
 * The PrestartHook `db-credentials` of the built-in secret hook: Revisions annotated
 * `prestart.dev/database` wait for the Secret `secretName` (a template: {{service}}, {{revision}})
 * with key `uri`, bound as DATABASE_URL (failurePolicy Fail: the hooks' default here).
 */
export async function createDbCredentialsHook(env: GatePodsEnv, secretName: string, resendInterval = '30s'): Promise<void> {
  await hookMethods(env.cluster.kubeConfig, 'default').createHook('db-credentials', {
    match: { annotation: { key: 'prestart.dev/database' } },
    timeout: '10m',
    resendInterval,
    contributions: { allowed: ['env'] },
    params: { secretName, requiredKeys: ['uri'], as: 'env', env: { DATABASE_URL: 'uri' } },
    delivery: { transport: 'http', url: 'http://prestart-hook-secret.knative-prestart.svc/' },
  });
}

export function rolloutStatus(env: GatePodsEnv, deployment: string, timeoutSeconds = 150): Promise<string> {
  return env.kubectl(
    ['-n', GATE_NS, 'rollout', 'status', `deployment/${deployment}`, `--timeout=${timeoutSeconds}s`],
    (timeoutSeconds + 10) * 1000,
  );
}

export function removeRelease(installed: { releaseDir: string } | undefined): void {
  if (installed) rmSync(installed.releaseDir, { recursive: true, force: true });
}
