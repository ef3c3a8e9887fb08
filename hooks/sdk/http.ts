// Serving a hook over HTTP: direct HTTP delivery, or a Knative Trigger's subscriber behind a
// Broker. Every delivery is answered at once (202, empty body) and the handler runs in the
// background; the completed event goes to the configured sink (K_SINK) or the request's replyTo.
// With mode "sync" a handler that finishes within the budget is answered 200 with the event
// instead. A 2xx answer never carries anything but a CloudEvent: behind a Broker any other body
// becomes a 502, which is retried, and the hook runs again.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import pino, { type Logger } from 'pino';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { DEFAULT_MAX_REQUEST_BYTES, type ParsedRequest, toBinary } from '../../schemas/index.ts';
import type { BackoffPolicy } from '../../transport/retry.ts';
import { defaultSource } from './outcome.ts';
import { createHookRunner, dispatchRequest, type HookRunner, type Job } from './runner.ts';
import { postEvent } from './send.ts';
import { tokenFileSource } from './token-file.ts';
import type { HookHandler } from './types.ts';

export interface ServeHookOptions {
  /** Serve only this PrestartHook: requests for other hooks are answered 202 and left alone. */
  name?: string;
  handler: HookHandler;
  /** Default $PORT, else 8080. 0 picks a free port. */
  port?: number;
  /** Default 0.0.0.0. */
  host?: string;
  /** Where replies go; default $K_SINK (a SinkBinding's Broker). Without one, each request's data.replyTo. "" means none. */
  sink?: string;
  /** The hook's CloudEvents source; default /prestart-hooks/<name>. */
  source?: string;
  logger?: Logger;
  /** "async" (default): 202 now, reply later. "sync": 200 with the reply when the handler finishes within syncBudgetMs. */
  mode?: 'async' | 'sync';
  /** Default 1000 ms; keep it well under 2 s, the gate's and Brokers' patience is not yours to spend. */
  syncBudgetMs?: number;
  /** Retries of a reply POST. */
  sendPolicy?: BackoffPolicy;
  /** Finished results (re-sent on redelivery) and cancels remembered. Default 1000. */
  remember?: number;
  /**
   * The projected ServiceAccount token file whose token goes with every reply (sender identity).
   * Default $PRESTART_TOKEN_FILE, else /var/run/secrets/tokens/prestart-token when it exists.
   */
  tokenFile?: string;
}

export interface HookApp {
  app: Express;
  runner: HookRunner;
  /** Aborts running handlers and pending reply sends. */
  stop(): Promise<void>;
}

export interface HookServer extends HookApp {
  /** http://127.0.0.1:PORT when listening on every interface. */
  url: string;
  port: number;
  server: Server;
  /** Stops taking requests, then stop(). */
  close(): Promise<void>;
}

export const DEFAULT_SYNC_BUDGET_MS = 1000;

export function createHookApp(opts: ServeHookOptions): HookApp {
  const log = opts.logger ?? pino({ name: `prestart-hook${opts.name ? `-${opts.name}` : ''}`, level: process.env.LOG_LEVEL ?? 'info' });
  const source = opts.source ?? defaultSource(opts.name);
  const sink = opts.sink ?? process.env.K_SINK ?? '';
  const budget = opts.syncBudgetMs ?? DEFAULT_SYNC_BUDGET_MS;
  const runner = createHookRunner({ handler: opts.handler, source, logger: log, ...(opts.remember ? { remember: opts.remember } : {}) });
  const stopping = new AbortController();
  const sends = new Set<Promise<void>>();

  const targetOf = (request: ParsedRequest): string | undefined => sink || request.data.replyTo || undefined;
  const bearer = tokenFileSource(opts.tokenFile);
  const post = (target: string, event: CloudEventRecord) =>
    postEvent(target, event, { signal: stopping.signal, bearer, ...(opts.sendPolicy ? { policy: opts.sendPolicy } : {}) });

  function deliver(request: ParsedRequest, final: CloudEventRecord): void {
    const target = targetOf(request);
    const fields = { event: request.key, outcome: (final.data as { outcome?: string }).outcome, replyId: final.id };
    if (!target) {
      log.error(fields, 'no K_SINK and no data.replyTo: the reply cannot be sent (set K_SINK, or use mode "sync")');
      return;
    }
    const sent = post(target, final)
      .then(() => log.info({ ...fields, to: target }, 'reply sent'))
      .catch((err: unknown) =>
        log.error({ ...fields, to: target, err }, 'reply not delivered; it is sent again when the gate re-sends the request'),
      )
      .finally(() => sends.delete(sent));
    sends.add(sent);
  }

  function deliverWhenDone(request: ParsedRequest, job: Job): void {
    void job.done.then((final) => {
      if (final) deliver(request, final);
    });
  }

  async function onRequest(req: Request, res: Response): Promise<void> {
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const dispatched = dispatchRequest(
      runner,
      { headers: req.headers, body },
      {
        ...(opts.name === undefined ? {} : { serves: opts.name }),
        logger: log,
        fields: { ceId: req.get('ce-id') },
        progressFor: (request) => {
          const target = targetOf(request);
          return target ? (event) => post(target, event) : undefined;
        },
      },
    );
    if (dispatched.type === 'refused') {
      res.status(dispatched.error.status).json({ error: dispatched.error.reason, code: dispatched.error.code });
      return;
    }
    if (dispatched.type === 'taken') {
      res.status(202).end();
      return;
    }
    const { request, submission } = dispatched;
    switch (submission.type) {
      case 'skipped':
        res.status(202).end();
        return;
      case 'finished':
        log.info({ event: request.key, replyId: submission.final.id }, 'repeated request: sending the same result again');
        if (opts.mode === 'sync') replyInBody(res, submission.final);
        else {
          res.status(202).end();
          deliver(request, submission.final);
        }
        return;
      case 'joined':
      case 'started': {
        const first = submission.type === 'started';
        if (!first) log.info({ event: request.key }, 'repeated request joins the run in progress');
        if (opts.mode !== 'sync') {
          res.status(202).end();
          if (first) deliverWhenDone(request, submission.job);
          return;
        }
        const final = await within(submission.job.done, budget);
        if (final === 'late') {
          res.status(202).end();
          if (first) deliverWhenDone(request, submission.job);
        } else if (final === undefined) res.status(202).end();
        else replyInBody(res, final);
        return;
      }
    }
  }

  const app = express();
  app.disable('x-powered-by');
  // Every body is taken raw: express.json() would skip application/cloudevents+json.
  app.post('/{*path}', express.raw({ type: () => true, limit: DEFAULT_MAX_REQUEST_BYTES }), (req, res, next) => {
    onRequest(req, res).catch(next);
  });
  app.get('/healthz', (_req, res) => {
    res.status(200).type('text/plain').send('ok');
  });
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
    const e = err as { status?: number; type?: string; message?: string };
    if (res.headersSent) {
      next(err);
      return;
    }
    const status = typeof e?.status === 'number' && e.status >= 400 && e.status < 500 ? e.status : 500;
    const reason =
      e?.type === 'entity.too.large' ? `the request is larger than ${DEFAULT_MAX_REQUEST_BYTES} bytes` : (e?.message ?? 'error');
    log.warn({ path: req.path, status, reason }, 'request failed');
    res.status(status).json({ error: reason });
  });

  return {
    app,
    runner,
    async stop() {
      stopping.abort(new Error('the hook is shutting down'));
      await runner.close();
      await Promise.allSettled([...sends]);
    },
  };
}

function replyInBody(res: Response, final: CloudEventRecord): void {
  const message = toBinary(final);
  res.status(200).set(message.headers).send(Buffer.from(message.body));
}

function within<T>(promise: Promise<T>, ms: number): Promise<T | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Listens and serves; resolves once the port is open. */
export async function serveHook(opts: ServeHookOptions): Promise<HookServer> {
  const hookApp = createHookApp(opts);
  const host = opts.host ?? '0.0.0.0';
  const port = opts.port ?? Number(process.env.PORT ?? 8080);
  const server = await new Promise<Server>((resolve, reject) => {
    const s = hookApp.app.listen(port, host, (err?: Error) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  });
  const actual = (server.address() as AddressInfo).port;
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return {
    ...hookApp,
    url: `http://${shown}:${actual}`,
    port: actual,
    server,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await hookApp.stop();
    },
  };
}
