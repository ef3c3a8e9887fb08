// Informer-backed caches of what the gate watches. Informers restart themselves after an error,
// so a flaky apiserver delays the gate but never stops it; each knows whether it has listed and
// since when it fails, so the gate can refuse to answer from a cache it cannot trust.
//
// Every replica serves the webhooks and the reply sinks, which read PrestartHooks, Namespaces and
// PrestartRuns: those informers run from the start. Revisions and Routes are read by the
// controller alone, so only a replica that leads (or once led) lists them (lead()). The caches
// hold trimmed views (gate/kube/cache-views.ts), lists come in pages, and the Revisions are two
// informers: the held ones (label-selected, what decide() reads) and a metadata-only stub of
// every Revision, indexed by Configuration (gate/kube/revision-index.ts) for supersession.
// The leader also watches the Revisions' pods for image drift (gate/checks/image-drift-check.ts); that
// informer never holds up the controller.
import { CoreV1Api, type KubeConfig, type KubernetesObject, setHeaderOptions, type V1Namespace } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  HOOKS,
  type HookObject,
  NAMESPACED_HOOKS,
  type NamespacedHookObject,
  REVISIONS,
  type Resource,
  type RevisionObject,
  ROUTES,
  type RouteObject,
  RUNS,
  type RunObject,
  watchPath,
} from '../../api/resources.ts';
import { HOLD_LABEL } from '../../api/types.ts';
import { ObjectLocks } from '../runtime/object-locks.ts';
import {
  heldRevisionView,
  METADATA_ONLY,
  METADATA_ONLY_LIST,
  type PodObject,
  podView,
  REVISION_UID_LABEL,
  revisionStub,
  routeView,
  runView,
} from './cache-views.ts';
import { type HookCatalog, type HookCatalogOptions, hookCatalog } from './hook-catalog.ts';
import { type Cache, type InformerHealth, type TrackedInformer, trackedInformer } from './informer.ts';
import type { KubeClient } from './kube-client.ts';
import { RevisionIndex } from './revision-index.ts';
import { WrittenRuns } from './written-runs.ts';

export type { Cache, InformerHealth };

export interface Caches {
  /** Held Revisions (prestart.dev/hold=true) as decide() reads them; filled once lead() was called. */
  revisions: Cache<RevisionObject>;
  /** Every Revision, as a stub (cache-views.ts revisionStub); filled once lead() was called. */
  revisionStubs: Cache<KubernetesObject>;
  /** The stubs by Configuration, and which carry the gate's finalizer. */
  revisionIndex: RevisionIndex;
  /** Routes, their traffic targets only; filled once lead() was called. */
  routes: Cache<RouteObject>;
  hooks: Cache<HookObject>;
  /** NamespacedPrestartHooks, every namespace's (read through gate/kube/hook-catalog.ts). */
  namespacedHooks: Cache<NamespacedHookObject>;
  /** Both kinds of hook as the core runs them, by namespace and by the name a run lists. */
  catalog: HookCatalog;
  /** PrestartRuns; finished ones slim (cache-views.ts runView). */
  runs: Cache<RunObject>;
  /** The runs this replica wrote and the informer has not delivered yet: `written.get` is the newest copy known. */
  written: WrittenRuns;
  namespaces: Cache<V1Namespace>;
  /** The pods of Knative Revisions (cache-views.ts podView); filled once lead() was called, which does not wait for it. */
  pods: Cache<PodObject>;
  /**
   * Each informer's state, for liveness and the webhooks' refusals: those the replica serves
   * from, and the controller's once they have listed (a leader still listing is not unhealthy).
   */
  health(): InformerHealth[];
  /** Resolves once every informer the webhooks and sinks read has listed successfully. */
  synced(): Promise<void>;
  /** Starts the controller's informers (once) and resolves once they have listed. */
  lead(): Promise<void>;
  stop(): Promise<void>;
}

export interface CacheOptions {
  namespaceSelector?: string;
  watchTimeoutSeconds?: number;
  /** Objects per list page; default LIST_PAGE_SIZE. */
  pageSize?: number;
  /** The namespaced hooks' limit and cluster domain (gate/kube/hook-catalog.ts). */
  namespacedHooks?: HookCatalogOptions;
}

/**
 * Objects per page when listing: one page of full objects is all a list holds unparsed at once
 * (a 10,000-Revision list in one response is a 40 MB string, parsed next to the cache it replaces).
 */
export const LIST_PAGE_SIZE = 500;

interface Listed<T> {
  /** null in an empty PartialObjectMetadataList. */
  items: T[] | null;
  metadata?: { resourceVersion?: string; continue?: string };
}

export function createCaches(kc: KubeConfig, client: KubeClient, log: Logger, opts: CacheOptions = {}): Caches {
  const core = kc.makeApiClient(CoreV1Api);
  const limit = opts.pageSize ?? LIST_PAGE_SIZE;
  // One list at a time: after a blip every informer re-lists at once, and their pages of full
  // objects, parsed side by side, were the gate's memory peak. In turn, a re-list costs one page.
  const turns = new ObjectLocks();
  const inTurn = <R>(list: () => Promise<R>) => turns.exclusive('list', list);
  const custom = <T extends KubernetesObject>(
    r: Resource,
    name: string,
    view: (obj: T) => T,
    extra: { labelSelector?: string; accept?: string } = {},
  ): TrackedInformer<T> => {
    const headers = extra.accept
      ? setHeaderOptions('Accept', extra.accept === METADATA_ONLY ? METADATA_ONLY_LIST : extra.accept)
      : undefined;
    const page = (cont: string | undefined) =>
      client.custom.listClusterCustomObject(
        { group: r.group, version: r.version, plural: r.plural, limit, _continue: cont, labelSelector: extra.labelSelector },
        headers,
      ) as Promise<Listed<T>>;
    return trackedInformer<T>(kc, watchPath(r), () => inTurn(() => pagedList(page, view)), name, log, {
      watchTimeoutSeconds: opts.watchTimeoutSeconds,
      transform: view,
      ...extra,
    });
  };
  const selector = opts.namespaceSelector;
  const serving = {
    namespaces: trackedInformer<V1Namespace>(
      kc,
      '/api/v1/namespaces',
      () =>
        inTurn(() =>
          pagedList(
            (cont) => core.listNamespace({ limit, _continue: cont, ...(selector ? { labelSelector: selector } : {}) }),
            (ns) => ns,
          ),
        ),
      'namespaces',
      log,
      { watchTimeoutSeconds: opts.watchTimeoutSeconds, labelSelector: selector },
    ),
    hooks: custom<HookObject>(HOOKS, HOOKS.plural, (h) => h),
    namespacedHooks: custom<NamespacedHookObject>(NAMESPACED_HOOKS, NAMESPACED_HOOKS.plural, withoutManagedFields),
    runs: custom<RunObject>(RUNS, RUNS.plural, runView),
  };
  const leading = {
    routes: custom<RouteObject>(ROUTES, ROUTES.plural, routeView),
    revisions: custom<RevisionObject>(REVISIONS, 'revisions (held)', heldRevisionView, { labelSelector: `${HOLD_LABEL}=true` }),
    revisionStubs: custom<KubernetesObject>(REVISIONS, 'revisions (all, metadata)', revisionStub, { accept: METADATA_ONLY }),
  };
  // The pods of every Revision: no label the gate stamps outlives a release (the hold label comes
  // off, the Deployment policy refuses it; the inject label only marks bindings), and one stamped
  // for this would be trusted only once the stamp policy required it. Knative's revisionUID label
  // is on every pod of a Revision and on nothing else (prestart-revision-pods guards it), so the
  // cache holds Knative's pods only, each slimmed to a few strings; the drift watch judges those
  // whose Revision has a released run.
  const drift = {
    pods: trackedInformer<PodObject>(
      kc,
      '/api/v1/pods',
      () =>
        inTurn(() =>
          pagedList(
            (cont) =>
              core.listPodForAllNamespaces({ limit, _continue: cont, labelSelector: REVISION_UID_LABEL }) as Promise<Listed<PodObject>>,
            podView,
          ),
        ),
      'pods (Revisions)',
      log,
      { watchTimeoutSeconds: opts.watchTimeoutSeconds, labelSelector: REVISION_UID_LABEL, transform: podView },
    ),
  };
  const revisionIndex = new RevisionIndex();
  // Registered before anyone else's handlers: the index is current when the controller hears of a change.
  leading.revisionStubs.cache.on('add', (obj) => revisionIndex.set(obj));
  leading.revisionStubs.cache.on('update', (obj) => revisionIndex.set(obj));
  leading.revisionStubs.cache.on('delete', (obj) => revisionIndex.delete(obj));

  const servingAll = Object.values(serving);
  const leadingAll = [...Object.values(leading), drift.pods] as TrackedInformer<KubernetesObject>[];
  let leadingStarted: Promise<void> | undefined;
  // Every run the gate writes is read back from that write until the watch delivers it.
  const written = new WrittenRuns(serving.runs.cache, runView);
  client.onRunWritten = (run) => written.note(run);
  return {
    revisions: leading.revisions.cache,
    revisionStubs: leading.revisionStubs.cache,
    revisionIndex,
    routes: leading.routes.cache,
    hooks: serving.hooks.cache,
    namespacedHooks: serving.namespacedHooks.cache,
    catalog: hookCatalog({ hooks: serving.hooks.cache, namespacedHooks: serving.namespacedHooks.cache }, opts.namespacedHooks),
    runs: serving.runs.cache,
    written,
    namespaces: serving.namespaces.cache,
    pods: drift.pods.cache,
    health: () => [...servingAll, ...leadingAll.filter((i) => leadingStarted && i.health().listed)].map((i) => i.health()),
    synced: async () => {
      await Promise.all(servingAll.map((i) => i.listed));
    },
    lead() {
      leadingStarted ??= (async () => {
        for (const informer of leadingAll) startInformer(informer);
        // Not the pods: a failing pods watch (RBAC not yet granted) must not keep the controller from releasing.
        await Promise.all(Object.values(leading).map((i) => i.listed));
      })();
      return leadingStarted;
    },
    async stop() {
      await Promise.all([...servingAll, ...leadingAll].map((i) => i.cache.stop()));
    },
  };
}

/** A team's hooks can be many: the cache keeps what the gate reads of each, not who wrote which field. */
function withoutManagedFields<T extends KubernetesObject>(obj: T): T {
  if (!obj.metadata?.managedFields) return obj;
  const { managedFields: _, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

function startInformer(informer: TrackedInformer<KubernetesObject>): void {
  // start() resolves after its first attempt, listed or not; a failure restarts it (informer.ts).
  void informer.cache.start().catch(() => undefined);
}

/**
 * Lists in pages of `limit` (continue tokens: one consistent snapshot), keeping only `view` of
 * each object: a page of full objects is garbage as soon as the next one is asked for.
 */
export async function pagedList<T extends KubernetesObject>(
  page: (cont: string | undefined) => Promise<Listed<T>>,
  view: (obj: T) => T,
): Promise<{ apiVersion: string; kind: string; items: T[]; metadata: { resourceVersion?: string } }> {
  const items: T[] = [];
  let cont: string | undefined;
  let resourceVersion: string | undefined;
  do {
    const listed = await page(cont);
    for (const obj of listed.items ?? []) items.push(view(obj));
    resourceVersion = listed.metadata?.resourceVersion;
    cont = listed.metadata?.continue || undefined;
  } while (cont);
  return { apiVersion: 'v1', kind: 'List', items, metadata: { resourceVersion } };
}

/**
 * Starts every informer the webhooks and sinks read and resolves once each has listed
 * successfully. A failed list (RBAC not yet granted, an apiserver restarting) is retried until it
 * succeeds: until then the gate is not ready and answers nothing from these caches.
 */
export async function syncCaches(caches: Caches): Promise<void> {
  for (const informer of [caches.namespaces, caches.hooks, caches.namespacedHooks, caches.runs]) {
    // start() resolves after its first attempt, listed or not; a failure restarts it (informer.ts).
    void informer.start().catch(() => undefined);
  }
  await caches.synced();
}

/**
 * Why the caches cannot be trusted right now, one line per informer: not listed yet, or failing
 * for at least `afterMs`. Empty when all is well.
 */
export function cacheProblems(health: readonly InformerHealth[], now: number, afterMs: number): string[] {
  const problems: string[] = [];
  for (const h of health) {
    const why = h.lastError ? `: ${h.lastError}` : '';
    if (!h.listed) problems.push(`${h.name}: not listed yet${why}`);
    else if (h.failingSince !== undefined && now - h.failingSince >= afterMs) {
      problems.push(`${h.name}: watch failing for ${Math.round((now - h.failingSince) / 1000)} s${why}`);
    }
  }
  return problems;
}
