// Writes no decision waits for, off the reconcile workers: Events (for people) and the
// Revision's condition (kn's view of the hold). A worker that waited for them between
// two Revisions' releases would make every release behind it wait too. They run a few at a time,
// never two for one Revision at once, and a newer condition replaces one still waiting; a
// condition that could not be written makes the controller look at its Revision again.
//
// A condition waits CONDITION_DELAY_MS before it is queued: it is for people (`kn
// revision describe`), and a Revision whose hooks answer within that time gets one write, its
// final state, instead of one per step (each a read and a status patch that would race the
// release on the apiserver and move the Revision's resourceVersion under it).
//
// They also wait while the reconciles have something to do that something happened to (the work
// queue's first lane: a new Revision, a stored reply): the apiserver is the resource
// both share, and a burst of 100 replies would otherwise have each release queue at the
// apiserver behind the Events and conditions of the ones before it. They never wait longer than
// MAX_YIELD_MS at a stretch, so a foreground that never rests still lets them through.
import { SendQueue } from '../delivery/send-queue.ts';

export const BACKGROUND_LIMITS = { perHook: 4, overall: 8 };
export const CONDITION_DELAY_MS = 1_000;
/** The longest the background waits for a busy foreground before it writes anyway. */
export const MAX_YIELD_MS = 5_000;

export class BackgroundWrites {
  private readonly queue = new SendQueue(BACKGROUND_LIMITS);
  private seq = 0;
  /** Conditions in their delay, by key: the newest write of each. */
  private readonly delayed = new Map<string, { write: () => Promise<void>; timer: NodeJS.Timeout }>();
  /** Set while the background yields to a busy foreground; fires to stop yielding. */
  private yielding: NodeJS.Timeout | undefined;
  /** Yielded MAX_YIELD_MS in a row: writes until the foreground has been quiet once. */
  private overdue = false;

  constructor(
    private readonly conditionDelayMs = CONDITION_DELAY_MS,
    private readonly maxYieldMs = MAX_YIELD_MS,
  ) {}

  /** The reconciles have urgent work (busy) or none left (quiet): the background waits for quiet. */
  foreground(busy: boolean): void {
    if (!busy) {
      this.overdue = false;
      this.stopYielding();
      return;
    }
    if (this.yielding || this.overdue) return;
    this.queue.pause();
    this.yielding = setTimeout(() => {
      this.overdue = true;
      this.stopYielding();
    }, this.maxYieldMs);
    this.yielding.unref();
  }

  private stopYielding(): void {
    if (!this.yielding) return;
    clearTimeout(this.yielding);
    this.yielding = undefined;
    this.queue.resume();
  }

  /** An Event: each one written once, in the order recorded (as far as a few at a time keeps it). */
  event(write: () => Promise<void>): void {
    this.queue.add({ lane: 'events', key: `event-${++this.seq}`, run: write });
  }

  /** The latest state of something keyed (a Revision's condition), after the delay: a waiting older one is replaced. */
  latest(key: string, write: () => Promise<void>): void {
    const waiting = this.delayed.get(key);
    if (waiting) {
      waiting.write = write;
      return;
    }
    const timer = setTimeout(() => {
      const newest = this.delayed.get(key);
      this.delayed.delete(key);
      if (newest) this.queue.add({ lane: 'conditions', key, run: newest.write });
    }, this.conditionDelayMs);
    timer.unref();
    this.delayed.set(key, { write, timer });
  }

  /** Drops what waits (leadership lost: the next leader decides again). */
  clear(): void {
    this.overdue = false;
    this.stopYielding();
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.queue.clear();
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }
}
