// The runner's dedupe, cancel and deadline rules, driven with handlers the test controls.
import test from 'ava';
import pino from 'pino';
import { createHookRunner, type Submission } from '../../../../hooks/sdk/runner.ts';
import {
  CancelledError,
  DeadlineError,
  type HookContext,
  type HookHandler,
  type HookOutcome,
  succeed,
} from '../../../../hooks/sdk/types.ts';
import type { CloudEventRecord } from '../../../../schemas/event.ts';
import { cancelEvent, parsed, requestEvent } from '../../../support/events.ts';

const silent = pino({ level: 'silent' });

/** A handler that waits until the test lets it finish, and counts its runs. */
function controlled() {
  const runs: { ctx: HookContext; finish: (o: HookOutcome) => void }[] = [];
  let started: () => void = () => {};
  const handler: HookHandler = (_req, ctx) =>
    new Promise<HookOutcome>((resolve, reject) => {
      runs.push({ ctx, finish: resolve });
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      started();
    });
  const nextStart = () =>
    new Promise<void>((resolve) => {
      started = resolve;
    });
  return { handler, runs, nextStart };
}

function jobOf(s: Submission) {
  if (s.type !== 'started' && s.type !== 'joined') throw new Error(`expected a job, got ${s.type}`);
  return s.job;
}

test('a repeat while running joins the run; a repeat after it finished gets the same final event', async (t) => {
  const h = controlled();
  const runner = createHookRunner({ handler: h.handler, source: '/t', logger: silent });
  const request = parsed(requestEvent());
  const started = h.nextStart();
  const first = runner.submit(request);
  t.is(first.type, 'started');
  await started;
  const again = runner.submit(request);
  t.is(again.type, 'joined');
  h.runs[0]?.finish(succeed('done'));
  const final = await jobOf(first).done;
  t.is(await jobOf(again).done, final);
  t.is(h.runs.length, 1, 'the handler ran once');
  const later = runner.submit(request);
  t.is(later.type, 'finished');
  if (later.type === 'finished') t.is(later.final.id, final?.id ?? 'none', 'same CloudEvent id: the gate sees a duplicate');
});

test('a cancel aborts the running handler with a CancelledError and no final event is produced', async (t) => {
  const h = controlled();
  const runner = createHookRunner({ handler: h.handler, source: '/t', logger: silent });
  const start = requestEvent();
  const started = h.nextStart();
  const job = jobOf(runner.submit(parsed(start)));
  await started;
  t.is(runner.cancel(parsed(cancelEvent(start, 'superseded by checkout-00003'))), 'aborted');
  t.is(await job.done, undefined);
  const reason = h.runs[0]?.ctx.signal.reason;
  t.true(reason instanceof CancelledError);
  t.is((reason as Error).message, 'superseded by checkout-00003');
  t.like(runner.submit(parsed(start)), { type: 'skipped' }, 'a resend of the cancelled start does not run it again');
  t.is(runner.running, 0);
});

test('a cancel that overtakes its start keeps the start from running', (t) => {
  const h = controlled();
  const runner = createHookRunner({ handler: h.handler, source: '/t', logger: silent });
  const start = requestEvent();
  t.is(runner.cancel(parsed(cancelEvent(start))), 'remembered');
  const s = runner.submit(parsed(start));
  t.is(s.type, 'skipped');
  if (s.type === 'skipped') t.regex(s.reason, /cancelled before it started \(Revision shop\/checkout-00002 was deleted\)/);
  t.is(h.runs.length, 0);
});

test('a request whose deadline has passed is not run', (t) => {
  const h = controlled();
  const runner = createHookRunner({ handler: h.handler, source: '/t', logger: silent });
  const s = runner.submit(parsed(requestEvent({ deadline: new Date(Date.now() - 1000) })));
  t.like(s, { type: 'skipped' });
  if (s.type === 'skipped') t.regex(s.reason, /deadline .* has passed/);
});

test('the signal aborts with a DeadlineError when the deadline passes during the run', async (t) => {
  const h = controlled();
  const runner = createHookRunner({ handler: h.handler, source: '/t', logger: silent });
  const job = jobOf(runner.submit(parsed(requestEvent({ deadline: new Date(Date.now() + 200) }))));
  t.is(await job.done, undefined);
  t.true(h.runs[0]?.ctx.signal.reason instanceof DeadlineError);
});

test('a handler that throws gets a failed final event, remembered like any other', async (t) => {
  const runner = createHookRunner({
    handler: async () => {
      throw new Error('database unreachable');
    },
    source: '/t',
    logger: silent,
  });
  const request = parsed(requestEvent());
  const final = await jobOf(runner.submit(request)).done;
  t.like(final?.data, { outcome: 'failed', message: 'the hook threw: database unreachable' });
  t.like(runner.submit(request), { type: 'finished' });
});

test('progress reports go out in order and before the final event; late ones are dropped', async (t) => {
  const sent: CloudEventRecord[] = [];
  let lateProgress: HookContext['progress'] = async () => {};
  const runner = createHookRunner({
    handler: async (_req, ctx) => {
      void ctx.progress(10, 'one');
      void ctx.progress(60, 'two');
      lateProgress = ctx.progress;
      return succeed('done');
    },
    source: '/t',
    logger: silent,
  });
  const slowSender = async (e: CloudEventRecord) => {
    await new Promise((resolve) => setTimeout(resolve, (e.data as { progress: number }).progress === 10 ? 50 : 0));
    sent.push(e);
  };
  const final = await jobOf(runner.submit(parsed(requestEvent()), slowSender)).done;
  await lateProgress(90, 'too late');
  t.deepEqual(
    sent.map((e) => e.data),
    [
      { outcome: 'progress', progress: 10, message: 'one' },
      { outcome: 'progress', progress: 60, message: 'two' },
    ],
  );
  t.like(final?.data, { outcome: 'succeeded' });
});

test('a progress sender that fails does not fail the run', async (t) => {
  const runner = createHookRunner({
    handler: async (_req, ctx) => {
      await ctx.progress(50);
      return succeed();
    },
    source: '/t',
    logger: silent,
  });
  const final = await jobOf(runner.submit(parsed(requestEvent()), () => Promise.reject(new Error('sink down')))).done;
  t.like(final?.data, { outcome: 'succeeded' });
});

test('finished results beyond `remember` are forgotten, oldest first', async (t) => {
  let runs = 0;
  const runner = createHookRunner({ handler: async () => succeed(`run ${++runs}`), source: '/t', logger: silent, remember: 1 });
  const a = parsed(requestEvent());
  const b = parsed(requestEvent());
  await jobOf(runner.submit(a)).done;
  await jobOf(runner.submit(b)).done;
  t.like(runner.submit(b), { type: 'finished' });
  t.like(runner.submit(a), { type: 'started' });
});

test('close() aborts running handlers and refuses new work', async (t) => {
  const h = controlled();
  const runner = createHookRunner({ handler: h.handler, source: '/t', logger: silent });
  const started = h.nextStart();
  const job = jobOf(runner.submit(parsed(requestEvent())));
  await started;
  await runner.close();
  t.is(await job.done, undefined);
  t.like(runner.submit(parsed(requestEvent())), { type: 'skipped', reason: 'the hook is shutting down' });
});
