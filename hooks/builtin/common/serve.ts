// What every built-in hook is configured with, and how it is served: an SDK hook server whose
// handler talks to Kubernetes as the hook's own identity.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type HookServer, serveHook } from '../../sdk/http.ts';
import type { HookHandler } from '../../sdk/types.ts';

export type BuiltinKind = 'job' | 'secret' | 'approval';

export interface BuiltinHookOptions {
  /** The hook's identity: see config/600-builtin-hooks.yaml for the RBAC each one needs. */
  kubeConfig: KubeConfig;
  /** Serve only this PrestartHook; default: any PrestartHook that delivers here. */
  name?: string;
  /** Longest pause between two looks at the cluster while waiting; default 5000 ms. */
  pollMaxMs?: number;
  logger?: Logger;
}

export interface ServeBuiltinOptions extends BuiltinHookOptions {
  /** Default $PORT, else 8080; 0 picks a free port. */
  port?: number;
  /** Default 0.0.0.0. */
  host?: string;
  /** Where replies go; default $K_SINK, else each request's data.replyTo. */
  sink?: string;
}

export const DEFAULT_POLL_MAX_MS = 5000;

export function serveBuiltin(kind: BuiltinKind, handler: HookHandler, opts: ServeBuiltinOptions): Promise<HookServer> {
  return serveHook({
    handler,
    source: `/prestart-hooks/builtin/${kind}${opts.name ? `/${opts.name}` : ''}`,
    ...(opts.name !== undefined ? { name: opts.name } : {}),
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    ...(opts.host !== undefined ? { host: opts.host } : {}),
    ...(opts.sink !== undefined ? { sink: opts.sink } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
}
