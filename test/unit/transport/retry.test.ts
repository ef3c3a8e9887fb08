// Retry pacing: exponential, jittered, bounded by tries and by time.
import test from 'ava';
import { backoffDelay, nextRetryDelay, RetriesExhausted, retry } from '../../../transport/retry.ts';

const policy = { attempts: 5, baseDelayMs: 100, maxDelayMs: 1_000, maxElapsedMs: 5_000 };

test('delays double per retry, with half of each step left to chance', (t) => {
  t.is(
    backoffDelay(1, policy, () => 0),
    50,
  );
  t.is(
    backoffDelay(1, policy, () => 1),
    100,
  );
  t.is(
    backoffDelay(2, policy, () => 0),
    100,
  );
  t.is(
    backoffDelay(3, policy, () => 1),
    400,
  );
});

test('no delay grows past maxDelayMs', (t) => {
  t.is(
    backoffDelay(20, policy, () => 1),
    1_000,
  );
  t.is(
    backoffDelay(20, policy, () => 0),
    500,
  );
});

test('two callers with different luck do not retry in lockstep', (t) => {
  t.not(
    backoffDelay(3, policy, () => 0.1),
    backoffDelay(3, policy, () => 0.9),
  );
});

test('retries stop after the last allowed try', (t) => {
  t.is(typeof nextRetryDelay(4, 0, policy), 'number');
  t.is(nextRetryDelay(5, 0, policy), undefined);
});

test('retries stop when the next pause would pass the time budget', (t) => {
  t.is(
    nextRetryDelay(1, 4_990, policy, () => 0),
    undefined,
  );
  t.is(
    nextRetryDelay(1, 4_000, policy, () => 0),
    50,
  );
});

const quick = { attempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxElapsedMs: 5_000 };

test('retry runs until a try succeeds, and says which try it is', async (t) => {
  const seen: number[] = [];
  const result = await retry(async (tries) => {
    seen.push(tries);
    if (tries < 3) throw new Error(`flaky ${tries}`);
    return 'done';
  }, quick);
  t.is(result, 'done');
  t.deepEqual(seen, [1, 2, 3]);
});

test('retry gives up when the policy does, naming the last failure and the tries', async (t) => {
  const retries: number[] = [];
  const err = await t.throwsAsync(
    retry(
      async (tries) => {
        throw new Error(`refused ${tries}`);
      },
      quick,
      { onRetry: (_err, _delay, tries) => retries.push(tries) },
    ),
    { instanceOf: RetriesExhausted },
  );
  t.is(err?.message, 'refused 3 (gave up after 3 tries)');
  t.is(err?.tries, 3);
  t.deepEqual(retries, [1, 2]);
});

test('a failure retriable() turns down is thrown at once, as it is', async (t) => {
  let calls = 0;
  const permanent = new Error('400 bad request');
  const err = await t.throwsAsync(
    retry(
      async () => {
        calls += 1;
        throw permanent;
      },
      quick,
      { retriable: (e) => e !== permanent },
    ),
  );
  t.is(err, permanent);
  t.is(calls, 1);
});

test('an abort ends a pause at once and rejects with the reason', async (t) => {
  const controller = new AbortController();
  const long = { attempts: 5, baseDelayMs: 60_000, maxDelayMs: 60_000, maxElapsedMs: 600_000 };
  const stopped = new Error('shutting down');
  const pending = retry(
    async () => {
      throw new Error('down');
    },
    long,
    { signal: controller.signal, onRetry: () => setImmediate(() => controller.abort(stopped)) },
  );
  t.is(await t.throwsAsync(pending), stopped);
});

test('no try starts once the signal has aborted', async (t) => {
  const controller = new AbortController();
  controller.abort(new Error('closed'));
  let calls = 0;
  await t.throwsAsync(
    retry(
      async () => {
        calls += 1;
      },
      quick,
      { signal: controller.signal },
    ),
    { message: 'closed' },
  );
  t.is(calls, 0);
});
