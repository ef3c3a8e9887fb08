// Shared by the built-in hook tests: a gate of their own (devcluster/gate/harness.ts), the
// hooks' RBAC and approval policy as installed, each hook served in this process on 127.0.0.1
// as its own ServiceAccount identity, and PrestartHooks delivering to it.
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import type { ExecutionContext } from 'ava';
import pino from 'pino';
import type { RunObject } from '../../../api/resources.ts';
import type { ContributionKind } from '../../../api/types.ts';
import { applyManifests } from '../../../devcluster/apply.ts';
import type { Cluster } from '../../../devcluster/control-plane.ts';
import {
  createHook,
  deleteHook,
  type GateEnv,
  gateEnv,
  getRevision,
  hookSpec,
  isHeld,
  waitUntilStamped,
} from '../../../devcluster/gate/harness.ts';
import { waitFor } from '../../../devcluster/wait.ts';
import type { BuiltinKind, ServeBuiltinOptions } from '../../../hooks/builtin/common/serve.ts';
import { serveApprovalHook, serveJobHook, serveSecretHook } from '../../../hooks/builtin/index.ts';
import type { HookServer } from '../../../hooks/sdk/http.ts';

const configDir = fileURLToPath(new URL('../../../config/', import.meta.url));
const SERVICE_ACCOUNT_GROUPS = ['system:serviceaccounts', 'system:serviceaccounts:knative-prestart'];
const SERVE: Record<BuiltinKind, (o: ServeBuiltinOptions) => Promise<HookServer>> = {
  job: serveJobHook,
  secret: serveSecretHook,
  approval: serveApprovalHook,
};

let installed: Promise<void> | undefined;

function installBuiltinConfig(cluster: Cluster): Promise<void> {
  installed ??= (async () => {
    for (const file of ['600-builtin-hooks.yaml', '610-approval-policy.yaml'])
      await applyManifests(cluster.kubeConfig, `${configDir}${file}`);
  })();
  return installed;
}

export interface BuiltinEnv extends GateEnv {
  /** PrestartHooks created through addHook, deleted by stop(). */
  hooks: string[];
}

export async function builtinEnv(name: string): Promise<BuiltinEnv> {
  const env = (await gateEnv(name)) as BuiltinEnv;
  env.hooks = [];
  await installBuiltinConfig(env.cluster);
  const stopGate = env.stop.bind(env);
  env.stop = async () => {
    await Promise.all(env.hooks.map((h) => deleteHook(env, h)));
    await stopGate();
  };
  return env;
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
  env: BuiltinEnv,
  suffix: string,
  url: string,
  opts: { params?: Record<string, unknown>; allowed?: ContributionKind[]; timeout?: string } = {},
): Promise<{ hook: string; annotations: Record<string, string> }> {
  const hook = `${env.instance}-${suffix}`;
  env.hooks.push(hook);
  const annotations = { 'prestart.test/hook': suffix };
  await createHook(
    env,
    hook,
    hookSpec(
      {
        match: {
          annotation: { key: 'prestart.test/hook', value: suffix },
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
        },
        params: opts.params ?? {},
        contributions: { allowed: opts.allowed ?? [] },
        // The CRD wants resendInterval ≤ timeout.
        ...(opts.timeout ? { timeout: opts.timeout, resendInterval: opts.timeout } : {}),
        delivery: { transport: 'http', url },
      },
      env.namespace,
    ),
  );
  await waitUntilStamped(env, hook, annotations);
  return { hook, annotations };
}

export function hookStatusOf(run: RunObject | undefined, hook: string) {
  return run?.status?.hooks?.find((h) => h.name === hook);
}

export async function waitReleased(env: GateEnv, revision: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(async () => !isHeld(await getRevision(env, revision)), { timeoutMs, what: `Revision ${revision} released` });
}
