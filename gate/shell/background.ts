// Writes no decision waits for, off the reconcile workers: Events (for people) and the
// Revision's condition (kn's view of the hold, issue 12). A worker that waited for them between
// two Revisions' releases would make every release behind it wait too. They run a few at a time,
// never two for one Revision at once, and a newer condition replaces one still waiting; a
// condition that could not be written makes the controller look at its Revision again.
import { SendQueue } from './sender.ts';

export const BACKGROUND_LIMITS = { perHook: 4, overall: 8 };

export class BackgroundWrites {
  private readonly queue = new SendQueue(BACKGROUND_LIMITS);
  private seq = 0;

  /** An Event: each one written once, in the order recorded (as far as a few at a time keeps it). */
  event(write: () => Promise<void>): void {
    this.queue.add({ lane: 'events', key: `event-${++this.seq}`, run: write });
  }

  /** The latest state of something keyed (a Revision's condition): a waiting older one is replaced. */
  latest(key: string, write: () => Promise<void>): void {
    this.queue.add({ lane: 'conditions', key, run: write });
  }

  /** Drops what waits (leadership lost: the next leader decides again). */
  clear(): void {
    this.queue.clear();
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }
}
