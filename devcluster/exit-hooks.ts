import { isMainThread } from 'node:worker_threads';

/**
 * Synchronous last-resort cleanups (kill process groups) run when this process exits for any
 * reason Node still controls: normal end, process.exit, an uncaught error, SIGINT/SIGTERM/SIGHUP.
 */
export type ExitReason = 'exit' | 'signal';
const cleanups = new Set<(reason: ExitReason) => void>();
let installed = false;

function runAll(reason: ExitReason): void {
  for (const fn of [...cleanups]) {
    cleanups.delete(fn);
    try {
      fn(reason);
    } catch {
      // Exiting anyway: one failed cleanup must not keep the others from running.
    }
  }
}

function onSignal(signal: NodeJS.Signals): void {
  runAll('signal');
  // Someone else listens too (test/run.ts waits for ava, then exits with its code): let them.
  // Otherwise behave as if we had never listened: die by the same signal.
  if (process.listenerCount(signal) <= 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', () => runAll('exit'));
  // Signals reach only the main thread; in a worker the kernel's parent-death signal (see
  // processes.ts) and the exit event cover it.
  if (isMainThread) {
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, onSignal);
  }
}

/**
 * Registers a cleanup; returns the function that unregisters it (after a normal stop). On a
 * signal it runs at once, and another listener of that signal may still stop things its way.
 */
export function onExit(fn: (reason: ExitReason) => void): () => void {
  install();
  cleanups.add(fn);
  return () => {
    cleanups.delete(fn);
  };
}
