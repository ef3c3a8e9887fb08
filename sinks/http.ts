// HTTP receiver for completed events: what hooks POST to directly (their replyTo) and what a
// Knative Trigger delivers from the Broker (binary or structured mode, with the filter's extra
// headers and extensions). The gate adds these routes to its own server's app.
//
// Answers: 202 with an EMPTY body once a reply is recorded or known to be a duplicate (a 2xx
// body would be forwarded by Knative's filter as a reply, or turned into a 502); 4xx with a JSON
// {error} for what no retry can fix (so Brokers stop retrying it); 503 for transient trouble
// (so Brokers and hooks retry).
import express, { type IRouter, type NextFunction, type Request, type Response } from 'express';
import pino, { type Logger } from 'pino';
import { DEFAULT_MAX_REPLY_BYTES, type KeyRing } from '../schemas/index.ts';
import { AUDIENCE_HEADER } from './identity.ts';
import { type Handled, handleCompleted, httpAnswer } from './intake.ts';
import { countReply, createSinkMetrics, type SinkMetrics } from './metrics.ts';
import type { ReplyIdentity } from './token-review.ts';
import type { OnReply } from './types.ts';

export interface HttpSinkOptions {
  keys: KeyRing;
  onReply: OnReply;
  /** Largest accepted body. Default 64 KiB. */
  maxBytes?: number;
  logger?: Logger;
  /** Counters; pass `createSinkMetrics(gateRegistry)` to expose them with the gate's metrics. */
  metrics?: SinkMetrics;
  /** What GET /healthz reports (the host process's liveness); default always ok. */
  health?: () => { ok: boolean; message: string };
  /**
   * Sender identity (--reply-identity optional|required): replies are checked against the hook's
   * ServiceAccount before the state is touched. Absent (off): the Authorization header is not read.
   */
  identity?: ReplyIdentity;
}

export const DEFAULT_SINK_MAX_BYTES = DEFAULT_MAX_REPLY_BYTES;
/** Paths that take events: `/` for Trigger subscribers (uri: http://gate/), `/events` for hooks. */
export const SINK_PATHS = ['/', '/events'];

/**
 * Adds the sink's routes to `router`: the gate adds them to its own express app (gate/gate.ts),
 * so a reply passes one router, not an app and a mounted sub-router (a mounted
 * sub-router is one more routing layer on every reply).
 */
export function installSinkRoutes(router: IRouter, opts: HttpSinkOptions): void {
  const maxBytes = opts.maxBytes ?? DEFAULT_SINK_MAX_BYTES;
  const log = opts.logger ?? pino({ name: 'http-sink' });
  const metrics = opts.metrics ?? createSinkMetrics();
  // express.json() would skip application/cloudevents+json; every body is taken raw and the
  // schemas' codec decides what it is.
  const rawBody = express.raw({ type: () => true, limit: maxBytes });

  router.get('/healthz', (_req, res) => {
    const { ok, message } = opts.health?.() ?? { ok: true, message: 'ok' };
    res
      .status(ok ? 200 : 503)
      .type('text/plain')
      .send(message);
  });

  // How a hook learns the audience to mint its reply token for: OPTIONS on a sink path names it
  // (and every answer to a POST does). With identity off the sink is exactly as it was.
  const announced = opts.identity?.audience;
  if (announced !== undefined) {
    router.options(SINK_PATHS, (_req, res) => {
      res.set(AUDIENCE_HEADER, announced).set('allow', 'POST, OPTIONS').status(204).end();
    });
  }

  router.post(SINK_PATHS, rawBody, async (req: Request, res: Response) => {
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    // Node's headers as they are: the codec normalises them once (copying them here first was a
    // quarter of the parse path's time).
    const message = { headers: req.headers, body };
    const identity = opts.identity;
    const handled = await handleCompleted(
      message,
      { keys: opts.keys, maxBytes, onReply: opts.onReply },
      identity ? { identity, authorization: req.headers.authorization } : undefined,
    );
    countReply(metrics, 'http', handled);
    logHandled(log, handled, req);
    const answer = httpAnswer(handled);
    if (identity) {
      res.set(AUDIENCE_HEADER, identity.audience);
      if (answer.status === 401) res.set('www-authenticate', `Bearer realm="knative-prestart", audience="${identity.audience}"`);
    }
    if (answer.error === undefined) res.status(answer.status).end();
    else res.status(answer.status).json({ error: answer.error });
  });

  // Body-parser refusals (too large, bad encoding, aborted) end here, never at the gate.
  router.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
    const e = err as { status?: number; statusCode?: number; type?: string; message?: string };
    const status = e?.status ?? e?.statusCode;
    if (typeof status !== 'number' || status < 400 || status >= 500) {
      next(err);
      return;
    }
    countReply(metrics, 'http', 'invalid');
    const reason = e.type === 'entity.too.large' ? `the event is larger than the ${maxBytes}-byte limit` : (e.message ?? 'bad request');
    log.warn({ path: req.path, status, reason, ceId: req.get('ce-id') }, 'completed event refused');
    if (!res.headersSent) res.status(status).json({ error: reason });
  });
}

function logHandled(log: Logger, handled: Handled, req: Request): void {
  switch (handled.outcome) {
    case 'applied':
    case 'duplicate':
      log.debug({ event: handled.reply.eventKey, hook: handled.reply.hook, outcome: handled.outcome }, 'completed event taken');
      return;
    case 'rejected':
      log.warn({ event: handled.reply.eventKey, hook: handled.reply.hook, reason: handled.reason }, 'completed event rejected by the gate');
      return;
    case 'invalid':
      log.warn({ path: req.path, code: handled.code, reason: handled.reason, ceId: req.get('ce-id') }, 'completed event refused');
      return;
    case 'transient':
      log.error(
        { event: handled.reply.eventKey, hook: handled.reply.hook, err: handled.error },
        'completed event not recorded; sender should retry',
      );
      return;
  }
}
