// client-node's ListWatch over a stand-in watch (no apiserver): it lists `listed` and then
// delivers only the events a test emits, as the apiserver's watch would.
import { type KubernetesObject, ListWatch, type Watch } from '@kubernetes/client-node';

export interface FedCache<T extends KubernetesObject> {
  cache: ListWatch<T>;
  /** Delivers a watch event with `obj` as given. */
  emit(phase: 'ADDED' | 'MODIFIED' | 'DELETED', obj: T): void;
}

export async function fedCache<T extends KubernetesObject>(listed: T[] = []): Promise<FedCache<T>> {
  let deliver: ((phase: string, obj: T) => void) | undefined;
  const watch = {
    watch: async (_path: string, _query: unknown, callback: (phase: string, obj: T) => void) => {
      deliver = callback;
      return new AbortController();
    },
  } as unknown as Watch;
  const cache = new ListWatch<T>(
    '/test',
    watch,
    async () => ({ apiVersion: 'v1', kind: 'List', items: listed, metadata: { resourceVersion: '1' } }),
    false,
  );
  await cache.start();
  return {
    cache,
    emit: (phase, obj) => {
      if (!deliver) throw new Error('the cache is not watching');
      deliver(phase, obj);
    },
  };
}
