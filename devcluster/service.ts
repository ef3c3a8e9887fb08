// One way to run a helper service of the dev cluster (nats-server, Prometheus, Jaeger): find its
// binary, start it in a directory of its own, wait until it answers, and stop it: killed with the
// test process if that dies first, its directory removed on stop.
import { accessSync, constants, rmSync } from 'node:fs';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { type Component, type ComponentSpec, describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { waitFor } from './wait.ts';

/** The first executable of the candidates (unset ones skipped), or a ClusterStartError saying how to get one. */
export function findExecutable(candidates: ReadonlyArray<string | undefined>, missing: string): string {
  for (const path of candidates) {
    if (!path) continue;
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // next candidate
    }
  }
  throw new ClusterStartError(missing);
}

/** `<dir>/<name>` for every directory on $PATH. */
export function onPath(name: string): string[] {
  return (process.env.PATH ?? '')
    .split(':')
    .filter(Boolean)
    .map((dir) => `${dir}/${name}`);
}

export interface RunningService {
  component: Component;
  stop(): Promise<void>;
}

/**
 * Starts `spec` with its log in `dir` and resolves once `ready()` holds; fails with the end of its
 * log when it exits first or is not ready in time (and then stops it and removes `dir`).
 */
export async function startService(
  spec: ComponentSpec,
  dir: string,
  ready: () => Promise<boolean>,
  wait: { what: string; timeoutMs: number; intervalMs?: number },
): Promise<RunningService> {
  const component = startComponent(spec, dir);
  const unregister = onExit(() => signalGroup(component.pid, 'SIGKILL'));
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await stopComponents([component], 5_000);
    unregister();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(ready, {
      what: wait.what,
      timeoutMs: wait.timeoutMs,
      intervalMs: wait.intervalMs ?? 100,
      bail: () =>
        component.exitInfo
          ? new ClusterStartError(`${spec.name} ${describeExit(component.exitInfo)}`, logTail(component.logFile))
          : undefined,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { component, stop };
}
