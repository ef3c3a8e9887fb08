// The PrestartRuns this replica wrote, each kept until its informer has caught up (the idea of
// client-go's MutationCache). A reconcile that follows a write, most of all the one a recorded
// reply wakes at once (no watch round trip between a hook's answer and the release),
// decides from what was written rather than from a cache one watch event behind.
//
// Which copy is newer is read from resourceVersion as a number, as client-go's mutation cache
// does: the apiserver calls it opaque, but etcd's revision is what it carries. When either is not
// a number the informer's copy wins, and a written copy older than TTL_MS is dropped anyway: the
// cost of either is one watch round trip, as before, never a decision from older state.
import type { RunObject } from '../../api/resources.ts';
import type { Cache } from './informer.ts';

/** How long a written copy may stand in for a watch event that has not come. */
export const TTL_MS = 30_000;

interface Written {
  run: RunObject;
  at: number;
}

export class WrittenRuns {
  private readonly written = new Map<string, Written>();

  constructor(
    private readonly cache: Cache<RunObject>,
    /** What the informer keeps of a run (cache-views.ts runView): a written copy is kept the same way. */
    private readonly view: (run: RunObject) => RunObject,
    private readonly now: () => number = () => performance.now(),
  ) {
    // The informer caught up, or the run is gone: its copy is the one to read from now on.
    const settle = (run: RunObject) => {
      const key = keyOf(run);
      const mine = this.written.get(key);
      if (mine && !isNewer(mine.run, run)) this.written.delete(key);
    };
    cache.on('add', settle);
    cache.on('update', settle);
    cache.on('delete', (run) => this.written.delete(keyOf(run)));
  }

  /** A run as the apiserver returned it from a create or a status write of this replica. */
  note(run: RunObject): void {
    const cached = this.cache.get(run.metadata?.name ?? '', run.metadata?.namespace);
    if (cached && !isNewer(run, cached)) return;
    this.written.set(keyOf(run), { run: this.view(run), at: this.now() });
  }

  /** The newest copy this replica knows: its own write when the informer has not seen it yet. */
  get(namespace: string, name: string): RunObject | undefined {
    const cached = this.cache.get(name, namespace);
    const key = `${namespace}/${name}`;
    const mine = this.written.get(key);
    if (!mine) return cached;
    if (this.now() - mine.at > TTL_MS) {
      this.written.delete(key);
      return cached;
    }
    return !cached || isNewer(mine.run, cached) ? mine.run : cached;
  }

  /** Written copies the informer has not caught up with (for tests and metrics). */
  get size(): number {
    return this.written.size;
  }
}

function keyOf(run: RunObject): string {
  return `${run.metadata?.namespace ?? ''}/${run.metadata?.name ?? ''}`;
}

/** True when `a` was written after `b`; false when either resourceVersion is not a number. */
export function isNewer(a: RunObject, b: RunObject): boolean {
  return isNewerVersion(a.metadata?.resourceVersion, b.metadata?.resourceVersion);
}

/** True when resourceVersion `a` is later than `b`; false when either is not a number (the caller then acts as before). */
export function isNewerVersion(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}
