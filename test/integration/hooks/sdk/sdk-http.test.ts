// serveHook() against real HTTP: the gate's requests in, replies out to a sink that verifies them.

import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import express from 'express';
import { isFinal } from '../../../../hooks/conformance/describe.ts';
import { CancelledError, serveHook, succeed, volumeContribution } from '../../../../hooks/sdk/index.ts';
import { toBinary, toStructured } from '../../../../schemas/index.ts';
import { cancelEvent, requestEvent } from '../../../support/events.ts';
import { listen } from '../../../support/http-server.ts';
import { gateSink, hookFor, post, recordingLogger, silent } from '../_support.ts';

test('answers 202 with an empty body at once, then posts progress and the final reply to data.replyTo', async (t) => {
  const sink = await gateSink(t);
  const hook = await hookFor(t, {
    name: 'db',
    handler: async (_req, ctx) => {
      await ctx.progress(50, 'half way');
      return succeed('database ready', [volumeContribution('db', 'orders-db')]);
    },
  });
  const response = await post(hook.url, toBinary(requestEvent({ hook: 'db', replyTo: sink.url })));
  t.is(response.status, 202);
  t.is(await response.text(), '');
  const final = await sink.waitFor(isFinal, 10_000);
  t.like(final?.reply, {
    outcome: 'succeeded',
    message: 'database ready',
    contributions: [{ name: 'db', secretName: 'orders-db', as: 'volume' }],
  });
  t.deepEqual(
    sink.replies.map((r) => r.reply?.outcome),
    ['progress', 'succeeded'],
  );
  t.like(sink.replies[0]?.reply, { progress: 50, message: 'half way' });
});

test('a structured-mode request is served like a binary one', async (t) => {
  const sink = await gateSink(t);
  const hook = await hookFor(t, { name: 'db', handler: async (req) => succeed(`hello ${req.revision.name}`) });
  t.is((await post(hook.url, toStructured(requestEvent({ hook: 'db', replyTo: sink.url })))).status, 202);
  t.like((await sink.waitFor(isFinal, 10_000))?.reply, { outcome: 'succeeded', message: 'hello checkout-00002' });
});

test('the configured sink (K_SINK) takes the replies, not data.replyTo', async (t) => {
  const broker = await gateSink(t);
  const replyTo = await gateSink(t);
  const previous = process.env.K_SINK;
  process.env.K_SINK = broker.url;
  t.teardown(() => {
    if (previous === undefined) delete process.env.K_SINK;
    else process.env.K_SINK = previous;
  });
  // No `sink` option: the default is read from K_SINK.
  const hook = await serveHook({ port: 0, host: '127.0.0.1', name: 'db', handler: async () => succeed('ok'), logger: silent });
  t.teardown(() => hook.close());
  await post(hook.url, toBinary(requestEvent({ hook: 'db', replyTo: replyTo.url })));
  t.truthy(await broker.waitFor(isFinal, 10_000));
  t.is(replyTo.replies.length, 0);
});

test('bad input is refused with its status and a JSON reason', async (t) => {
  let runs = 0;
  const hook = await hookFor(t, { name: 'db', handler: async () => succeed(String(++runs)) });
  const notCe = await post(hook.url, { headers: { 'content-type': 'application/json' }, body: '{"status":"hello"}' });
  t.is(notCe.status, 400);
  t.like(await notCe.json(), { code: 'malformed' });
  const wrongType = toBinary(requestEvent({ hook: 'db' }));
  wrongType.headers['ce-type'] = 'com.example.other';
  const refused = await post(hook.url, wrongType);
  t.is(refused.status, 400);
  t.deepEqual(await refused.json(), { error: 'type is "com.example.other", expected "revision.prestart.requested"', code: 'wrong-type' });
  t.is(runs, 0);
});

test('a request for another hook is answered 202 and not run, and says so in the log', async (t) => {
  let runs = 0;
  const { logger, lines } = recordingLogger();
  const hook = await hookFor(t, { name: 'db', handler: async () => succeed(String(++runs)), logger });
  const response = await post(hook.url, toBinary(requestEvent({ hook: 'cache-warm' })));
  t.is(response.status, 202);
  t.is(await response.text(), '');
  t.is(runs, 0);
  t.true(lines.some((l) => l.msg === 'request for hook "cache-warm" ignored: this service serves "db"'));
});

test('a repeat while running joins the run; a repeat after it finished re-sends the same completed event', async (t) => {
  const sink = await gateSink(t);
  let runs = 0;
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const hook = await hookFor(t, {
    name: 'db',
    handler: async () => {
      runs += 1;
      await gate;
      return succeed('migrated');
    },
  });
  const request = toBinary(requestEvent({ hook: 'db', replyTo: sink.url }));
  t.is((await post(hook.url, request)).status, 202);
  await waitFor(() => runs === 1, { what: 'the handler to start' });
  t.is((await post(hook.url, request)).status, 202);
  release();
  const first = await sink.waitFor(isFinal, 10_000);
  t.is((await post(hook.url, request)).status, 202);
  const second = await sink.waitFor((r) => isFinal(r) && r !== first, 10_000);
  t.is(runs, 1, 'the handler ran once');
  t.is(second?.event?.id, first?.event?.id, 'the same CloudEvent id: the gate sees a duplicate');
});

test('a cancel aborts the running handler and no reply is sent', async (t) => {
  const sink = await gateSink(t);
  let aborted: unknown;
  const hook = await hookFor(t, {
    name: 'db',
    handler: (_req, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener('abort', () => {
          aborted = ctx.signal.reason;
          reject(ctx.signal.reason);
        });
      }),
  });
  const start = requestEvent({ hook: 'db', replyTo: sink.url });
  await post(hook.url, toBinary(start));
  await waitFor(() => hook.runner.running === 1, { what: 'the handler to start' });
  t.is((await post(hook.url, toBinary(cancelEvent(start, 'superseded by checkout-00003')))).status, 202);
  await waitFor(() => hook.runner.running === 0, { what: 'the run to end' });
  t.true(aborted instanceof CancelledError);
  t.is((aborted as Error).message, 'superseded by checkout-00003');
  // A resend of the cancelled start is taken and not run again.
  t.is((await post(hook.url, toBinary(start))).status, 202);
  t.is(hook.runner.running, 0);
  await new Promise((resolve) => setImmediate(resolve));
  t.is(sink.replies.length, 0);
});

test('mode sync answers 200 with the completed event when the handler is quick', async (t) => {
  const hook = await hookFor(t, { name: 'db', mode: 'sync', handler: async () => succeed('quick') });
  const response = await post(hook.url, toBinary(requestEvent({ hook: 'db' })));
  t.is(response.status, 200);
  t.is(response.headers.get('ce-type'), 'revision.prestart.completed');
  t.deepEqual(await response.json(), { outcome: 'succeeded', message: 'quick' });
});

test('mode sync answers 202 when the handler outlasts the budget, and replies later', async (t) => {
  const sink = await gateSink(t);
  let release: () => void = () => {};
  const slow = new Promise<void>((resolve) => {
    release = resolve;
  });
  const hook = await hookFor(t, {
    name: 'db',
    mode: 'sync',
    syncBudgetMs: 100,
    handler: async () => {
      await slow;
      return succeed('slow');
    },
  });
  const response = await post(hook.url, toBinary(requestEvent({ hook: 'db', replyTo: sink.url })));
  t.is(response.status, 202);
  t.is(await response.text(), '');
  release();
  t.like((await sink.waitFor(isFinal, 10_000))?.reply, { message: 'slow' });
});

test('a handler that throws is answered with a failed reply', async (t) => {
  const sink = await gateSink(t);
  const hook = await hookFor(t, {
    name: 'db',
    handler: async () => {
      throw new Error('no route to database');
    },
  });
  await post(hook.url, toBinary(requestEvent({ hook: 'db', replyTo: sink.url })));
  t.like((await sink.waitFor(isFinal, 10_000))?.reply, { outcome: 'failed', message: 'the hook threw: no route to database' });
});

test('a reply answered 503 is sent again; one answered 422 is not', async (t) => {
  const posts: number[] = [];
  const statuses = [503, 503, 202];
  const app = express();
  app.post('/flaky', (_req, res) => {
    posts.push(Date.now());
    res.status(statuses[posts.length - 1] ?? 202).end();
  });
  let refusals = 0;
  app.post('/refusing', (_req, res) => {
    refusals += 1;
    res.status(422).json({ error: 'stale attempt 1 of hook db (current attempt 2)' });
  });
  const receiver = await listen(app);
  t.teardown(() => receiver.close());
  const { logger, lines } = recordingLogger();
  const policy = { attempts: 5, baseDelayMs: 20, maxDelayMs: 50, maxElapsedMs: 5_000 };
  const hook = await hookFor(t, { name: 'db', handler: async () => succeed(), sendPolicy: policy, logger });

  await post(hook.url, toBinary(requestEvent({ hook: 'db', replyTo: `${receiver.url}/flaky` })));
  await waitFor(() => lines.some((l) => l.msg === 'reply sent'), { what: 'the reply to get through' });
  t.is(posts.length, 3);

  await post(hook.url, toBinary(requestEvent({ hook: 'db', replyTo: `${receiver.url}/refusing` })));
  const failure = await waitFor(() => lines.find((l) => String(l.msg).startsWith('reply not delivered')), {
    what: 'the refusal to be logged',
  });
  t.is(refusals, 1);
  t.regex((failure.err as { message: string }).message, /answered 422: \{"error":"stale attempt 1 of hook db \(current attempt 2\)"\}/);
});
