// One quickstart run's shared state: its settings and output, the phase clock, the deadline that
// starts once the binaries are ready, and what to stop on the way out (last started, first stopped).
// Kept free of heavy imports, so the first lines print while the rest of the code still loads.
import { rmSync } from 'node:fs';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import type { QuickstartOptions } from './args.ts';
import { type Colors, colors, createOutput, type Output } from './output.ts';
import { type Phase, PhaseClock, seconds } from './summary.ts';

/** A failure the quickstart explains in one line (no stack trace). */
export class QuickstartFailure extends Error {
  override readonly name = 'QuickstartFailure';
}

export class Session {
  readonly out: Output;
  readonly c: Colors;
  readonly phases = new PhaseClock();
  /** Aborted by a signal: a running build stops. */
  readonly interrupted = new AbortController();
  cluster: Cluster | undefined;
  /** The demo runs on the real node (chosen in main.ts before the build). */
  realNode = false;
  /** How long the code after the build took to load (the Kubernetes client and the gate), counted in the control plane's phase. */
  codeLoadMs = 0;
  /** Set before the cluster starts, so a stop during its start still removes the directory. */
  clusterDir: string | undefined;
  private readonly cleanups: { what: string; run: () => unknown; boundMs: number }[] = [];
  private deadline = Number.POSITIVE_INFINITY;
  private finishing = false;

  constructor(readonly opts: QuickstartOptions) {
    this.out = createOutput(process.stdout);
    this.c = colors(this.out.tty && !process.env.NO_COLOR);
  }

  get isFinishing(): boolean {
    return this.finishing;
  }

  /** Run at the end, the last registered first; each gets `boundMs` (default 10 s) before the next starts. */
  onStop(what: string, run: () => unknown, { boundMs = 10_000 }: { boundMs?: number } = {}): void {
    this.cleanups.push({ what, run, boundMs });
  }

  /** Everything after the binaries shares one deadline, from now. */
  startDeadline(): void {
    this.deadline = performance.now() + this.opts.timeoutMs;
  }

  /** `work`, or a one-line failure naming what it was waiting for when the deadline passes. */
  async step<T>(what: () => string, work: Promise<T>): Promise<T> {
    if (!Number.isFinite(this.deadline)) return work;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new QuickstartFailure(`timed out after ${seconds(this.opts.timeoutMs)} (--timeout) waiting for ${what()}`)),
        Math.max(this.deadline - performance.now(), 0),
      );
    });
    try {
      return await Promise.race([work, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async phase<T>(name: Phase, work: () => Promise<T>): Promise<T> {
    this.phases.start(name);
    const result = await work();
    this.phases.end(name);
    return result;
  }

  /**
   * Stops everything this process started, last first, then exits. `lastWords` goes to stderr
   * at the very end, so a failure's one-line reason is the last thing printed.
   */
  async finish(code: number, how: { keepLogs?: boolean; lastWords?: string } = {}): Promise<never> {
    this.finishing = true;
    for (const cleanup of this.cleanups.reverse()) {
      // A component already gone (a signal's exit hooks kill the cluster's processes at once)
      // must not hold up the rest: each cleanup gets a bounded moment.
      await Promise.race([
        Promise.resolve().then(cleanup.run),
        new Promise((resolve) => setTimeout(resolve, cleanup.boundMs).unref()),
      ]).catch((err: unknown) => process.stderr.write(`quickstart: stopping ${cleanup.what}: ${(err as Error).message}\n`));
    }
    if (this.cluster) {
      await this.cluster.stop({ keepDir: how.keepLogs ?? false });
      this.out.say(
        how.keepLogs ? `stopped everything; logs kept in ${this.cluster.dir}` : `stopped everything; removed ${this.cluster.dir}`,
      );
    } else if (this.clusterDir) {
      // Stopped while the cluster was starting: its exit hook has killed what it had started.
      rmSync(this.clusterDir, { recursive: true, force: true });
    }
    if (how.lastWords) process.stderr.write(`${how.lastWords}\n`);
    process.exit(code);
  }
}

/** The cluster's processes do not keep Node alive on their own (devcluster/processes.ts): this does, until a signal. */
export function keepAlive(): void {
  setInterval(() => {}, 60_000);
}
