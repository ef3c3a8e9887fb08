// Graceful shutdown of the gate's HTTP servers (webhooks, reply sink). A terminating pod keeps
// receiving requests for a while after SIGTERM: its endpoint leaves the Service only once the
// EndpointSlice and kube-proxy (or the apiserver's resolver) catch up, and the apiserver's pooled
// keep-alive connections reach this pod whatever the Service says. Closing at once refuses those
// requests, and the Revision webhook fails open, so a create the stamp policy refuses (a rollout
// restart of the gate's pods shows it). So a draining server:
//   - answers every request as usual (this listener runs before the app's), with `Connection: close`, so each pooled connection is
//     dropped after its next answer and the client reconnects through the current Service;
//   - ends when nothing is in flight and no request arrived for `quietMs`, or after `maxMs`.
// It never closes an idle connection itself before the end: a request written onto a connection
// the server is closing fails (Go retries a POST only when nothing was written).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';

export interface DrainOptions {
  /** Done once no request arrived for this long (and none is in flight). */
  quietMs: number;
  /** Done after this long whatever arrives: the pod's grace period must leave room for the rest of the stop. */
  maxMs: number;
}

export interface DrainState {
  inFlight: number;
  /** ms since the epoch of the last request to arrive, or of the drain's start if later. */
  lastRequestAt: number;
  startedAt: number;
}

/** Whether a drain may end: the pure decision, tested without servers. */
export function drainDone(s: DrainState, now: number, o: DrainOptions): boolean {
  if (now - s.startedAt >= o.maxMs) return true;
  return s.inFlight === 0 && now - Math.max(s.lastRequestAt, s.startedAt) >= o.quietMs;
}

export interface Drainer {
  /** Starts draining (idempotent) and resolves when drainDone says so. */
  drain(o: DrainOptions): Promise<void>;
  readonly draining: boolean;
}

const NOT_WORK = new Set(['/readyz', '/healthz', '/metrics']);

/** Counts the requests of `servers` (but probes and scrapes) from now on. */
export function trackRequests(servers: ReadonlyArray<Server | HttpsServer>, now: () => number = Date.now): Drainer {
  let inFlight = 0;
  let lastRequestAt = 0;
  let startedAt = 0;
  let draining = false;
  let done: Promise<void> | undefined;
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    if (draining) res.setHeader('Connection', 'close');
    // The kubelet's probes and Prometheus' scrapes come every few seconds whatever the Service
    // says: they would keep a drain from ever being quiet.
    if (NOT_WORK.has((req.url ?? '').split('?')[0] ?? '')) return;
    inFlight++;
    lastRequestAt = now();
    res.once('close', () => {
      inFlight--;
    });
  };
  for (const server of servers) server.prependListener('request', onRequest);
  return {
    get draining() {
      return draining;
    },
    drain(o) {
      if (done) return done;
      draining = true;
      startedAt = now();
      done = new Promise((resolve) => {
        const check = () => {
          if (drainDone({ inFlight, lastRequestAt, startedAt }, now(), o)) resolve();
          else setTimeout(check, Math.min(250, o.quietMs));
        };
        check();
      });
      return done;
    },
  };
}
