// Informer-backed caches of what the gate watches. Informers restart themselves after a watch
// error, so a flaky apiserver delays the gate but never stops it.
import {
  CoreV1Api,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  makeInformer,
  type ObjectCache,
  type V1Namespace,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine } from '../../api/kube-errors.ts';
import {
  HOOKS,
  type HookObject,
  REVISIONS,
  type Resource,
  type RevisionObject,
  ROUTES,
  type RouteObject,
  RUNS,
  type RunObject,
  watchPath,
} from '../../api/resources.ts';
import type { KubeClient } from './kube-client.ts';

export type Cache<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export interface Caches {
  revisions: Cache<RevisionObject>;
  routes: Cache<RouteObject>;
  hooks: Cache<HookObject>;
  runs: Cache<RunObject>;
  namespaces: Cache<V1Namespace>;
  stop(): Promise<void>;
}

const RESTART_DELAY_MS = 2_000;

function informerFor<T extends KubernetesObject>(kc: KubeConfig, client: KubeClient, r: Resource, log: Logger): Cache<T> {
  const informer = makeInformer<T>(kc, watchPath(r), async () => {
    const list = await client.list<T>(r);
    return { apiVersion: 'v1', kind: 'List', items: list.items, metadata: list.metadata ?? {} };
  });
  restartOnError(informer, r.plural, log);
  return informer;
}

function restartOnError<T extends KubernetesObject>(informer: Informer<T>, what: string, log: Logger): void {
  let stopped = false;
  const originalStop = informer.stop.bind(informer);
  informer.stop = async () => {
    stopped = true;
    await originalStop();
  };
  informer.on('error', (err?: unknown) => {
    if (stopped) return;
    log.warn({ err: errorLine(err), what }, 'watch failed; restarting');
    setTimeout(() => {
      if (!stopped) informer.start().catch((e: unknown) => log.warn({ err: errorLine(e), what }, 'restart failed'));
    }, RESTART_DELAY_MS).unref();
  });
}

export async function startCaches(kc: KubeConfig, client: KubeClient, log: Logger, namespaceSelector?: string): Promise<Caches> {
  const core = kc.makeApiClient(CoreV1Api);
  const namespaces = makeInformer<V1Namespace>(
    kc,
    '/api/v1/namespaces',
    () => core.listNamespace(namespaceSelector ? { labelSelector: namespaceSelector } : {}),
    namespaceSelector,
  );
  restartOnError(namespaces, 'namespaces', log);
  const caches: Caches = {
    revisions: informerFor<RevisionObject>(kc, client, REVISIONS, log),
    routes: informerFor<RouteObject>(kc, client, ROUTES, log),
    hooks: informerFor<HookObject>(kc, client, HOOKS, log),
    runs: informerFor<RunObject>(kc, client, RUNS, log),
    namespaces,
    async stop() {
      await Promise.all([this.revisions, this.routes, this.hooks, this.runs, this.namespaces].map((i) => i.stop()));
    },
  };
  return caches;
}

/** Starts every informer and resolves once each has listed (its cache is warm). */
export async function syncCaches(caches: Caches): Promise<void> {
  await Promise.all([caches.namespaces, caches.hooks, caches.runs, caches.routes, caches.revisions].map((i) => i.start()));
}
