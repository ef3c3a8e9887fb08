// Shared by the built-in hook tests: a gate of their own (devcluster/gate/env.ts), the
// hooks' RBAC and approval policy as installed, each hook served in this process on 127.0.0.1
// as its own ServiceAccount identity, and PrestartHooks delivering to it.
import { fileURLToPath } from 'node:url';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { ExecutionContext } from 'ava';
import pino from 'pino';
import { REVISIONS, type RunObject } from '../../../../api/resources.ts';
import type { ContributionKind } from '../../../../api/types.ts';
import type { BuiltinKind, ServeBuiltinOptions } from '../../../../hooks/builtin/common/serve.ts';
import { serveApprovalHook, serveJobHook, serveSecretHook } from '../../../../hooks/builtin/index.ts';
import type { HookServer } from '../../../../hooks/sdk/http.ts';

const configDir = fileURLToPath(new URL('../../../../config/', import.meta.url));
const SERVICE_ACCOUNT_GROUPS = ['system:serviceaccounts', 'system:serviceaccounts:knative-prestart'];
const SERVE: Record<BuiltinKind, (o: ServeBuiltinOptions) => Promise<HookServer>> = {
  job: serveJobHook,
  secret: serveSecretHook,
  approval: serveApprovalHook,
};

let installed: Promise<void> | undefined;

/** config/600-builtin-hooks.yaml and 610-approval-policy.yaml, applied once per process. */
export function installBuiltinConfig(cluster: Cluster): Promise<void> {
  installed ??= (async () => {
    for (const file of ['600-builtin-hooks.yaml', '610-approval-policy.yaml'])
      await applyManifests(cluster.kubeConfig, `${configDir}${file}`);
  })();
  return installed;
}

/**
 * A gate env of its own, with the built-in hooks' RBAC and approval policy installed, and (unless
 * bindHooks is false) the job and secret hooks bound in its namespace, as an admin binds them
 * in each namespace they serve.
 */
export async function builtinEnv(name: string, { bindHooks = true }: { bindHooks?: boolean } = {}): Promise<GateEnv> {
  const env = await gateEnv(name);
  await installBuiltinConfig(env.cluster);
  if (bindHooks) await bindHooksIn(env.admin, env.namespace);
  return env;
}

/** `kubectl create rolebinding prestart-hook-<kind> -n NAMESPACE ...`, as config/600-builtin-hooks.yaml says. */
export async function bindHooksIn(admin: KubeConfig, namespace: string, kinds: ('job' | 'secret')[] = ['job', 'secret']): Promise<void> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  for (const kind of kinds) {
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: `prestart-hook-${kind}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `knative-prestart-hook-${kind}-namespace` },
        subjects: [{ kind: 'ServiceAccount', name: `prestart-hook-${kind}`, namespace: 'knative-prestart' }],
      },
    });
  }
}

/** The kubeconfig of a hook's ServiceAccount (config/600-builtin-hooks.yaml): RBAC decides what it may do. */
export async function hookIdentity(env: GateEnv, kind: BuiltinKind): Promise<{ kubeConfig: KubeConfig; path: string }> {
  const path = await env.cluster.mintUserKubeconfig(`system:serviceaccount:knative-prestart:prestart-hook-${kind}`, SERVICE_ACCOUNT_GROUPS);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(path);
  return { kubeConfig, path };
}

/** The built-in hook, served in this process; replies go to each request's replyTo (the gate's sink). */
export async function serveBuiltinHook(t: ExecutionContext, env: GateEnv, kind: BuiltinKind): Promise<HookServer> {
  const { kubeConfig } = await hookIdentity(env, kind);
  const server = await SERVE[kind]({
    kubeConfig,
    host: '127.0.0.1',
    port: 0,
    sink: '',
    pollMaxMs: 500,
    logger: pino({ name: `hook-${kind}`, level: process.env.HOOK_LOG_LEVEL ?? 'silent' }),
  });
  t.teardown(() => server.close());
  return server;
}

/**
 * A PrestartHook delivering to `url`, matching Revisions of the env's namespace that carry the
 * annotation it returns (so each test's Revisions meet only its own hook).
 */
export async function addHook(
  env: GateEnv,
  suffix: string,
  url: string,
  opts: { params?: Record<string, unknown>; allowed?: ContributionKind[]; timeout?: string } = {},
): Promise<{ hook: string; annotations: Record<string, string> }> {
  const hook = `${env.instance}-${suffix}`;
  const annotations = { 'prestart.test/hook': suffix };
  await env.createHook(hook, {
    match: env.annotationMatch('prestart.test/hook', suffix),
    params: opts.params ?? {},
    contributions: { allowed: opts.allowed ?? [] },
    // The CRD wants resendInterval ≤ timeout.
    ...(opts.timeout ? { timeout: opts.timeout, resendInterval: opts.timeout } : {}),
    delivery: { transport: 'http', url },
  });
  await env.waitUntilStamped(hook, annotations);
  return { hook, annotations };
}

export function hookStatusOf(run: RunObject | undefined, hook: string) {
  return run?.status?.hooks?.find((h) => h.name === hook);
}

/** The approval policy takes effect a moment after it is created: probe with a dry run until it answers. */
export async function approvalPolicyInForce(env: GateEnv): Promise<void> {
  await waitFor(
    () =>
      env.custom
        .createNamespacedCustomObject({
          ...REVISIONS,
          namespace: env.namespace,
          dryRun: 'All',
          body: {
            apiVersion: 'serving.knative.dev/v1',
            kind: 'Revision',
            metadata: {
              name: 'probe',
              annotations: { 'prestart.dev/approval.probe': 'approved', 'prestart.dev/approval-by.probe': 'nobody' },
            },
            spec: { containers: [{ image: 'dev.local/probe:v1' }] },
          },
        })
        .then(
          () => false,
          (err: unknown) => err instanceof ApiException && /approval-by\.probe must be/.test(String(err.body)),
        ),
    { what: 'the approval policy to be in force' },
  );
}
