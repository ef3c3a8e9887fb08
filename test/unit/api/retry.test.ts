// Retry pacing: exponential, jittered, bounded by tries and by time.
import test from 'ava';
import { backoffDelay, nextRetryDelay } from '../../../api/retry.ts';

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
