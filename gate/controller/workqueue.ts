// A deduplicating, rate-limited work queue keyed by "namespace/name", after client-go's
// workqueue: a key is processed by one worker at a time, adding a key that is already waiting
// is a no-op, and a key added while it is being processed runs once more afterwards.
//
// Two lanes: what something happened to (an informer event, a stored reply: add())
// goes before what a timer brought back (a resend, a deadline, a retry, bookkeeping: addAfter,
// addRateLimited). 1,000 Revisions whose resends come due together would otherwise queue every
// new Revision and every answered one behind a second of status writes each. The timers' lane
// still gets every SCHEDULED_TURN-th pick, so it is never starved, and a timer's key that
// something happens to meanwhile moves to the first lane.

const BASE_DELAY_MS = 5;
const MAX_DELAY_MS = 1_000_000;
/** One pick in this many goes to the timers' lane while the first lane has keys. */
export const SCHEDULED_TURN = 4;

type Lane = 'now' | 'scheduled';

/** What the queue reports, like knative/pkg's workqueue metrics (gate/telemetry/metrics.ts). */
export interface QueueInstruments {
  added(): void;
  /** How long a key waited between being queued and a worker taking it. */
  waited(ms: number): void;
  retried(): void;
}

export class WorkQueue {
  private readonly lanes: Record<Lane, string[]> = { now: [], scheduled: [] };
  private picks = 0;
  /** Keys waiting (or to run again after their current run), with the lane they wait in. */
  private readonly dirty = new Map<string, Lane>();
  private readonly processing = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private waiters: Array<() => void> = [];
  private stopped = false;
  private readonly queuedAt = new Map<string, number>();
  /** Keys being processed that were taken from the first lane. */
  private readonly urgentRunning = new Set<string>();
  private wasBusy = false;
  instruments: QueueInstruments | undefined;
  /** Told when the first lane gets work (busy) and when it and what was taken from it are done (quiet). */
  onBusy: ((busy: boolean) => void) | undefined;

  /** Keys in the first lane, waiting or being processed. */
  get busy(): boolean {
    return this.lanes.now.length > 0 || this.urgentRunning.size > 0;
  }

  private tellBusy(): void {
    const busy = this.busy;
    if (busy === this.wasBusy) return;
    this.wasBusy = busy;
    this.onBusy?.(busy);
  }

  /** Something happened to the key: it goes in the first lane. */
  add(key: string): void {
    this.enqueue(key, 'now');
  }

  private enqueue(key: string, lane: Lane): void {
    if (this.stopped) return;
    const waiting = this.dirty.get(key);
    if (waiting === 'now' || waiting === lane) return;
    if (waiting === 'scheduled') {
      // Promoted: it waits in the first lane now (or runs from it again after its current run).
      this.dirty.set(key, 'now');
      const at = this.lanes.scheduled.indexOf(key);
      if (at >= 0) {
        this.lanes.scheduled.splice(at, 1);
        this.push(key, 'now');
      }
      return;
    }
    this.dirty.set(key, lane);
    this.instruments?.added();
    if (!this.processing.has(key)) {
      this.push(key, lane);
      this.wake();
    }
  }

  /** Adds the key after `ms`; an earlier pending timer for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.enqueue(key, 'scheduled');
      return;
    }
    const at = Date.now() + ms;
    const pending = this.timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.enqueue(key, 'scheduled');
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
    while (this.length === 0 && !this.stopped) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    if (this.stopped) return undefined;
    const { now, scheduled } = this.lanes;
    const turn = ++this.picks % SCHEDULED_TURN === 0;
    const fromNow = !(scheduled.length > 0 && (now.length === 0 || turn));
    const key = (fromNow ? now.shift() : scheduled.shift()) as string;
    if (fromNow) this.urgentRunning.add(key);
    this.instruments?.waited(performance.now() - (this.queuedAt.get(key) ?? performance.now()));
    this.queuedAt.delete(key);
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }

  done(key: string): void {
    this.processing.delete(key);
    this.urgentRunning.delete(key);
    const lane = this.dirty.get(key);
    if (lane) {
      this.push(key, lane);
      this.wake();
    }
    this.tellBusy();
  }

  private push(key: string, lane: Lane): void {
    this.lanes[lane].push(key);
    this.queuedAt.set(key, performance.now());
    if (lane === 'now') this.tellBusy();
  }

  get length(): number {
    return this.lanes.now.length + this.lanes.scheduled.length;
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
