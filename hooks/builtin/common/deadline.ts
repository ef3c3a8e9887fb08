// A hook that waits (for a Job, a Secret, a person) stops a little before the gate's deadline
// and says why in a `failed` reply. Past the deadline the gate marks the hook TimedOut with no
// word from it, and the SDK sends nothing more.

/** Deadline minus 10% of the time left, at least 1 s and at most 10 s. */
export function giveUpAt(deadline: Date, now: Date = new Date()): Date {
  const left = deadline.getTime() - now.getTime();
  const margin = Math.min(10_000, Math.max(1_000, left * 0.1));
  return new Date(deadline.getTime() - margin);
}

/** "2m30s", "45s", "1h5m": how long a wait lasted, for messages. */
export function humanDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m > 0 ? `${m}m` : ''}`;
  if (m > 0) return `${m}m${s > 0 ? `${s}s` : ''}`;
  return `${s}s`;
}
