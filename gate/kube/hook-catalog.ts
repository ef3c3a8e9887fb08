// The hooks the gate knows, as the core runs them: every PrestartHook, and each namespace's
// NamespacedPrestartHooks only for that namespace's Revisions (gate/core/namespaced-hooks.ts).
// The webhook stamps from forNamespace, the controller snapshots from it, and whatever looks a
// hook up by the name a run lists (reply identity, the transports' tokens) uses get: one place
// decides what a name means, so a namespaced hook can be neither read for another namespace nor
// taken for an admin's.
import { type HookObject, type NamespacedHookObject, toHook } from '../../api/resources.ts';
import type { PrestartHook } from '../../api/types.ts';
import {
  DEFAULT_CLUSTER_DOMAIN,
  DEFAULT_NAMESPACED_HOOK_LIMIT,
  namespacedHook,
  namespaceOfHook,
  overLimitProblem,
} from '../core/namespaced-hooks.ts';
import type { Cache } from './informer.ts';

export interface HookCatalog {
  /**
   * What may hold a Revision of `namespace`: every PrestartHook, and that namespace's
   * NamespacedPrestartHooks. In a namespace over its limit each of these carries the reason as its
   * `problem`: the webhook refuses a Revision one of them matches, and a run that lists one fails it.
   */
  forNamespace(namespace: string): PrestartHook[];
  /** The hook a run lists by this name (`<namespace>/<name>` for a namespaced one), or undefined. */
  get(name: string): PrestartHook | undefined;
  /** Whether any namespace has a NamespacedPrestartHook (the Revision webhook is then needed). */
  anyNamespaced(): boolean;
}

export interface HookCatalogOptions {
  /** --namespaced-hook-limit; default DEFAULT_NAMESPACED_HOOK_LIMIT. */
  limit?: number;
  /** The cluster's DNS domain the Services' addresses end in; default cluster.local. */
  clusterDomain?: string;
}

export function hookCatalog(
  caches: { hooks: Pick<Cache<HookObject>, 'list' | 'get'>; namespacedHooks: Pick<Cache<NamespacedHookObject>, 'list' | 'get'> },
  opts: HookCatalogOptions = {},
): HookCatalog {
  const limit = opts.limit ?? DEFAULT_NAMESPACED_HOOK_LIMIT;
  const domain = opts.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const convert = (obj: NamespacedHookObject, problem?: string): PrestartHook =>
    namespacedHook(
      {
        namespace: obj.metadata?.namespace ?? '',
        name: obj.metadata?.name ?? '',
        generation: obj.metadata?.generation ?? 0,
        spec: obj.spec,
      },
      domain,
      problem,
    );
  const live = (objs: readonly NamespacedHookObject[]) => objs.filter((o) => !o.metadata?.deletionTimestamp);
  const ofNamespace = (namespace: string): PrestartHook[] => {
    const objs = live(caches.namespacedHooks.list(namespace));
    const problem = objs.length > limit ? overLimitProblem(namespace, objs.length, limit) : undefined;
    return objs.map((o) => convert(o, problem));
  };
  return {
    forNamespace: (namespace) => [...caches.hooks.list().map(toHook), ...ofNamespace(namespace)],
    get(name) {
      const namespace = namespaceOfHook(name);
      if (namespace === undefined) {
        const obj = caches.hooks.get(name);
        return obj ? toHook(obj) : undefined;
      }
      const local = name.slice(namespace.length + 1);
      const obj = caches.namespacedHooks.get(local, namespace);
      if (!obj || obj.metadata?.deletionTimestamp) return undefined;
      const count = live(caches.namespacedHooks.list(namespace)).length;
      return convert(obj, count > limit ? overLimitProblem(namespace, count, limit) : undefined);
    },
    anyNamespaced: () => caches.namespacedHooks.list().length > 0,
  };
}
