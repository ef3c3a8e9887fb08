// A deduplicating, rate-limited work queue keyed by "namespace/name", after client-go's
// workqueue: a key is processed by one worker at a time, adding a key that is already waiting
// is a no-op, and a key added while it is being processed runs once more afterwards.

const BASE_DELAY_MS = 5;
const MAX_DELAY_MS = 1_000_000;

/** What the queue reports, like knative/pkg's workqueue metrics (gate/shell/metrics.ts). */
export interface QueueInstruments {
  added(): void;
  /** How long a key waited between being queued and a worker taking it. */
  waited(ms: number): void;
  retried(): void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private waiters: Array<() => void> = [];
  private stopped = false;
  private readonly queuedAt = new Map<string, number>();
  instruments: QueueInstruments | undefined;

  add(key: string): void {
    if (this.stopped || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.instruments?.added();
    if (!this.processing.has(key)) {
      this.push(key);
      this.wake();
    }
  }

  /** Adds the key after `ms`; an earlier pending timer for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const pending = this.timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Exponential backoff per key (5 ms doubling), reset by forget(). */
  addRateLimited(key: string): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.instruments?.retried();
    this.addAfter(key, Math.min(BASE_DELAY_MS * 2 ** n, MAX_DELAY_MS));
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  /** Resolves with the next key, or undefined once the queue is shut down. */
  async get(): Promise<string | undefined> {
    while (this.queue.length === 0 && !this.stopped) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    if (this.stopped) return undefined;
    const key = this.queue.shift() as string;
    this.instruments?.waited(performance.now() - (this.queuedAt.get(key) ?? performance.now()));
    this.queuedAt.delete(key);
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.push(key);
      this.wake();
    }
  }

  private push(key: string): void {
    this.queue.push(key);
    this.queuedAt.set(key, performance.now());
  }

  get length(): number {
    return this.queue.length;
  }

  shutdown(): void {
    this.stopped = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.wake(true);
  }

  private wake(all = false): void {
    const waiters = all ? this.waiters : this.waiters.splice(0, 1);
    if (all) this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}
