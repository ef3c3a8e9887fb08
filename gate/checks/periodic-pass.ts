// A leader's background check that looks again on its own every few minutes and soon after it is
// poked (a burst of pokes, such as an informer's first list, makes one pass). Passes never overlap
// and a failed one is logged, never thrown: such checks report, they block nothing.
import type { Logger } from 'pino';
import { errorLine } from '../../api/kube-errors.ts';

export interface PeriodicPass {
  /** Something the check reads changed: a pass follows after the debounce. */
  poke(): void;
  /** A pass that starts after this call (it joins one already queued). */
  runNow(): Promise<void>;
  /** No pass starts after this; resolves when the running one ends. */
  stop(): Promise<void>;
}

export interface PeriodicPassOptions {
  /** One pass; it should look at `stopped()` between slow steps. */
  pass: (stopped: () => boolean) => Promise<void>;
  periodMs: number;
  debounceMs: number;
  log: Logger;
  /** For the log line of a failed pass: "Broker namespace check". */
  what: string;
}

export function startPeriodicPass(opts: PeriodicPassOptions): PeriodicPass {
  let chain: Promise<unknown> = Promise.resolve();
  let queued: Promise<void> | undefined;
  let debounce: NodeJS.Timeout | undefined;
  let stopped = false;
  const isStopped = () => stopped;

  const runNow = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (queued) return queued;
    const next = chain.then(() => {
      queued = undefined;
      return opts.pass(isStopped);
    });
    queued = next;
    chain = next.catch((err: unknown) => opts.log.warn({ err: errorLine(err) }, `${opts.what} failed`));
    return next;
  };
  const inBackground = () => void runNow().catch(() => undefined);

  inBackground();
  const timer = setInterval(inBackground, opts.periodMs);
  timer.unref();

  return {
    poke() {
      if (stopped || debounce) return;
      debounce = setTimeout(() => {
        debounce = undefined;
        inBackground();
      }, opts.debounceMs);
      debounce.unref();
    },
    runNow,
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(debounce);
      await chain;
    },
  };
}
