// The direct HTTP transport against a real express server on 127.0.0.1 playing each kind of hook.

import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import test from 'ava';
import express from 'express';
import { createHttpTransport } from '../../../emitter/http.ts';
import { TransportError } from '../../../emitter/transport.ts';
import type { Message } from '../../../schemas/event.ts';
import { parseCompleted, toBinary, toStructured } from '../../../schemas/index.ts';
import { completedEvent, requestEvent } from '../../support/events.ts';
import { deferred, type Listening, listen } from '../../support/http-server.ts';
import { keys } from '../../support/keys.ts';

const received: { path: string; headers: Record<string, string | string[] | undefined>; body: string }[] = [];
const release = deferred();
let hook: Listening;

function send(message: Message, res: express.Response, status = 200): void {
  res
    .status(status)
    .set(message.headers)
    .send(typeof message.body === 'string' ? message.body : Buffer.from(message.body));
}

test.before(async () => {
  const app = express();
  app.use(express.raw({ type: () => true }));
  app.use((req, _res, next) => {
    received.push({ path: req.path, headers: req.headers, body: Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '' });
    next();
  });
  app.post('/sync-binary', (_req, res) => send(toBinary(completedEvent(requestEvent({ hook: 'sync' }))), res));
  app.post('/sync-structured', (_req, res) => send(toStructured(completedEvent(requestEvent({ hook: 'sync' }))), res, 201));
  app.post('/accepted', (_req, res) => {
    res.status(202).end();
  });
  app.post('/no-content', (_req, res) => {
    res.status(204).end();
  });
  app.post('/ok-empty', (_req, res) => {
    res.status(200).end();
  });
  app.post('/garbage', (_req, res) => {
    res.status(200).type('text/html').send('<html><body>OK, migration started</body></html>');
  });
  app.post('/down', (_req, res) => {
    res.status(500).type('text/plain').send('database is down');
  });
  app.post('/busy', (_req, res) => {
    res.status(429).set('retry-after', '5').end();
  });
  app.post('/bad', (_req, res) => {
    res.status(400).json({ error: 'params.target is required' });
  });
  app.post('/moved', (_req, res) => {
    res.redirect(307, '/accepted');
  });
  app.post('/slow', async (_req, res) => {
    await release.promise;
    res.status(202).end();
  });
  app.post('/huge', (_req, res) => {
    res
      .status(200)
      .set('ce-specversion', '1.0')
      .type('application/json')
      .send('x'.repeat(64 * 1024));
  });
  hook = await listen(app);
});

test.after.always(async () => {
  release.resolve();
  await hook?.close();
});

const delivery = (path: string) => ({ transport: 'http' as const, url: `${hook.url}${path}` });

async function sendError(t: import('ava').ExecutionContext, path: string, opts = {}): Promise<TransportError> {
  const transport = createHttpTransport(opts);
  try {
    const error = await t.throwsAsync(transport.send(requestEvent(), delivery(path), 'db-migrate'), { instanceOf: TransportError });
    return error as TransportError;
  } finally {
    await transport.close();
  }
}

test.serial('the request arrives in binary mode with the CloudEvent attributes as ce- headers', async (t) => {
  const transport = createHttpTransport();
  const event = requestEvent();
  await transport.send(event, delivery('/accepted'), 'db-migrate');
  const got = received.findLast((r) => r.path === '/accepted');
  t.truthy(got);
  t.is(got?.headers['ce-id'], event.id);
  t.is(got?.headers['ce-type'], 'revision.prestart.requested');
  t.is(got?.headers['ce-specversion'], '1.0');
  t.is(got?.headers['ce-prestarthook'], 'db-migrate');
  t.regex(String(got?.headers['content-type']), /^application\/json/);
  t.is(JSON.parse(got?.body ?? '{}').hook.name, 'db-migrate');
  await transport.close();
});

test('200 with a binary-mode CloudEvent is a synchronous reply the gate can verify', async (t) => {
  const transport = createHttpTransport();
  const outcome = await transport.send(requestEvent(), delivery('/sync-binary'), 'sync');
  t.is(outcome.type, 'replied');
  if (outcome.type !== 'replied') return;
  t.is(outcome.reply.headers['ce-type'], 'revision.prestart.completed');
  t.true(Object.keys(outcome.reply.headers).every((k) => k === k.toLowerCase()));
  const parsed = parseCompleted(outcome.reply, { keys, maxBytes: 64 * 1024 });
  t.true(parsed.ok);
  if (parsed.ok) t.like(parsed.reply, { hook: 'sync', outcome: 'succeeded', attempt: 1 });
  await transport.close();
});

test('201 with a structured-mode CloudEvent is a synchronous reply too', async (t) => {
  const transport = createHttpTransport();
  const outcome = await transport.send(requestEvent(), delivery('/sync-structured'), 'sync');
  t.is(outcome.type, 'replied');
  if (outcome.type === 'replied') t.true(parseCompleted(outcome.reply, { keys, maxBytes: 64 * 1024 }).ok);
  await transport.close();
});

for (const path of ['/accepted', '/no-content', '/ok-empty']) {
  test(`an empty 2xx answer (${path}) means accepted`, async (t) => {
    const transport = createHttpTransport();
    t.deepEqual(await transport.send(requestEvent(), delivery(path), 'db-migrate'), { type: 'accepted' });
    await transport.close();
  });
}

test('200 with a body that is not a CloudEvent fails for good and says what to answer instead', async (t) => {
  const err = await sendError(t, '/garbage');
  t.false(err.retriable);
  t.regex(err.message, /200/);
  t.regex(err.message, /not a CloudEvent/);
  t.regex(err.message, /OK, migration started/);
  t.regex(err.message, /202 with an empty body/);
});

test('500 is retriable and carries the status and the body excerpt', async (t) => {
  const err = await sendError(t, '/down');
  t.true(err.retriable);
  t.regex(err.message, /500: database is down/);
});

test('429 is retriable', async (t) => {
  const err = await sendError(t, '/busy');
  t.true(err.retriable);
  t.regex(err.message, /429/);
});

test('400 is permanent and carries the hook’s explanation', async (t) => {
  const err = await sendError(t, '/bad');
  t.false(err.retriable);
  t.regex(err.message, /400/);
  t.regex(err.message, /params\.target is required/);
});

test('redirects are not followed', async (t) => {
  const err = await sendError(t, '/moved');
  t.false(err.retriable);
  t.regex(err.message, /307/);
});

test('a hook that does not answer in time is a retriable timeout, reported when the deadline passes', async (t) => {
  const started = Date.now();
  const err = await sendError(t, '/slow', { timeoutMs: 300 });
  const elapsed = Date.now() - started;
  t.true(err.retriable);
  t.regex(err.message, /within 300 ms/);
  t.true(elapsed >= 290 && elapsed < 3_000, `took ${elapsed} ms`);
});

test('a reply larger than the limit is refused for good', async (t) => {
  const err = await sendError(t, '/huge', { maxReplyBytes: 1024 });
  t.false(err.retriable);
  t.regex(err.message, /larger than the 1024-byte limit/);
});

test('a refused connection is retriable and names the cause', async (t) => {
  const [port] = await freePorts(1);
  const transport = createHttpTransport();
  const err = await t.throwsAsync(transport.send(requestEvent(), { transport: 'http', url: `http://127.0.0.1:${port}/` }, 'db-migrate'), {
    instanceOf: TransportError,
  });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /ECONNREFUSED/);
  await transport.close();
});

test('a hook without a URL is a configuration error', async (t) => {
  const transport = createHttpTransport();
  const err = await t.throwsAsync(transport.send(requestEvent(), { transport: 'http' }, 'db-migrate'), { instanceOf: TransportError });
  t.false(err?.retriable);
  t.regex(err?.message ?? '', /delivery\.url/);
});
