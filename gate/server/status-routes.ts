// What the sink's port answers besides replies: readiness (/readyz), liveness (what /healthz
// reports; sinks/http.ts serves it) and the metrics Prometheus scrapes (/metrics).
import type { Router } from 'express';
import type { Registry } from 'prom-client';
import { type Caches, cacheProblems } from '../kube/caches.ts';

export interface StatusRoutes {
  /** What /healthz reports. */
  health(): { ok: boolean; message: string };
  /** Every informer has listed, the webhooks serve and the controller may lead. */
  markReady(): void;
  /** The gate is stopping: no longer ready. */
  markStopping(): void;
}

/** `watchFailureMs`: how long an informer may fail before the replica is no longer live. */
export function installStatusRoutes(app: Router, caches: Pick<Caches, 'health'>, watchFailureMs: number, registry: Registry): StatusRoutes {
  // Ready once every informer has listed, the webhooks serve and the controller may lead: a probe
  // (and the tests) must not route admission or replies to a gate that is still starting.
  let ready = false;
  let stopping = false;
  app.get('/readyz', (_req, res) => {
    const waiting = cacheProblems(caches.health(), Date.now(), Number.POSITIVE_INFINITY);
    res
      .status(ready ? 200 : 503)
      .type('text/plain')
      .send(ready ? 'ok' : [stopping ? 'stopping' : 'starting', ...waiting].join('\n'));
  });
  app.get('/metrics', async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics());
  });
  return {
    // Live while no informer has been failing for watchFailureMs: a replica whose watches
    // cannot recover is restarted by its liveness probe instead of serving a stale picture.
    health: () => {
      const problems = cacheProblems(caches.health(), Date.now(), watchFailureMs);
      return { ok: problems.length === 0, message: problems.length === 0 ? 'ok' : problems.join('\n') };
    },
    markReady: () => {
      ready = true;
    },
    markStopping: () => {
      ready = false;
      stopping = true;
    },
  };
}
