import test from 'ava';
import { DurationError, formatDuration, parseDurationMs, parseDurationSeconds } from '../../../../gate/core/duration.ts';

test('parses the Go durations people write in hook specs', (t) => {
  t.is(parseDurationSeconds('90s'), 90);
  t.is(parseDurationSeconds('10m'), 600);
  t.is(parseDurationSeconds('1h30m'), 5400);
  t.is(parseDurationMs('500ms'), 500);
  t.is(parseDurationSeconds('1.5h'), 5400);
  t.is(parseDurationMs('2m0.5s'), 120_500);
  t.is(parseDurationMs('1us'), 0.001);
  t.is(parseDurationMs('0'), 0);
  t.is(parseDurationMs('-1m'), -60_000);
});

test('rejects malformed durations with a message naming the input and the expected form', (t) => {
  for (const bad of ['', '10', 'abc', '1x', '1h 30m', 's', '-', '1.2.3s']) {
    const err = t.throws(() => parseDurationMs(bad), { instanceOf: DurationError });
    t.true(err?.message.includes(JSON.stringify(bad)), err?.message);
    t.regex(err?.message ?? '', /e\.g\. "90s"/);
  }
  t.regex(t.throws(() => parseDurationMs('10'))?.message ?? '', /missing unit/);
  t.throws(() => parseDurationMs(undefined as unknown as string), { instanceOf: DurationError });
});

test('formats seconds back the short way', (t) => {
  t.is(formatDuration(90), '1m30s');
  t.is(formatDuration(600), '10m');
  t.is(formatDuration(3600), '1h');
  t.is(formatDuration(5400), '1h30m');
  t.is(formatDuration(0.5), '500ms');
  t.is(formatDuration(0), '0s');
  t.is(formatDuration(1.5), '1.5s');
});
