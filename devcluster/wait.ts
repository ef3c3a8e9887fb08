export interface WaitForOptions {
  /** Names what should happen, for the timeout message: "pod web-1 Running". */
  what: string;
  /** Default 30 s. */
  timeoutMs?: number;
  /** First pause between tries; it grows to at most 1 s. Default 100 ms. */
  intervalMs?: number;
  /** Checked before every try: an error returned here ends the wait at once (a process died). */
  bail?: () => Error | undefined;
}

/** Thrown when the condition never held; `lastError` is what the last try threw, if anything. */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
  constructor(
    message: string,
    readonly lastError?: unknown,
  ) {
    super(message);
  }
}

function describe(value: unknown): string {
  if (value instanceof Error) return value.message.split('\n')[0] ?? value.name;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/**
 * Polls `fn` until it returns something other than undefined, null, false or an empty array, and returns that.
 * A throw counts as "not yet". On timeout it throws one line that names what never happened
 * and what the last try saw, instead of a test that hangs or a bare "timeout".
 */
export async function waitFor<T>(fn: () => T | Promise<T>, opts: WaitForOptions): Promise<Exclude<T, undefined | null | false>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let interval = opts.intervalMs ?? 100;
  let last: { error?: unknown; value?: unknown } = {};
  for (;;) {
    const bailError = opts.bail?.();
    if (bailError) throw bailError;
    let value: T | undefined;
    let failed: { error: unknown } | undefined;
    try {
      value = await fn();
    } catch (error) {
      failed = { error };
    }
    // An empty array counts as "not yet": a wait for "the events that match" must not end before one does.
    const empty = Array.isArray(value) && value.length === 0;
    if (value !== undefined && value !== null && value !== false && !empty) return value as Exclude<T, undefined | null | false>;
    last = failed ?? { value };
    const left = deadline - Date.now();
    if (left <= 0) {
      const seen = 'error' in last ? `; last error: ${describe(last.error)}` : `; last result: ${describe(last.value)}`;
      throw new WaitTimeoutError(`timed out after ${(timeoutMs / 1000).toFixed(1)}s waiting for ${opts.what}${seen}`, last.error);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(interval, left)));
    interval = Math.min(interval * 1.5, 1000);
  }
}
