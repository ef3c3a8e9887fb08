import { ApiException } from '@kubernetes/client-node';
import test from 'ava';
import { giveUpAt, humanDuration } from '../../../../../hooks/builtin/common/deadline.ts';
import { errorLine, isTransient } from '../../../../../hooks/builtin/common/kube.ts';

test('a hook gives up a little before the gate’s deadline: 10% of the time left, 1 to 10 s', (t) => {
  const now = new Date('2030-01-01T00:00:00Z');
  const at = (ms: number) => new Date(now.getTime() + ms);
  t.deepEqual(giveUpAt(at(60_000), now), at(54_000));
  t.deepEqual(giveUpAt(at(5_000), now), at(4_000));
  t.deepEqual(giveUpAt(at(3_600_000), now), at(3_590_000));
});

test('durations read like people write them', (t) => {
  t.is(humanDuration(4_400), '4s');
  t.is(humanDuration(150_000), '2m30s');
  t.is(humanDuration(600_000), '10m');
  t.is(humanDuration(3_900_000), '1h5m');
});

test('which API errors are worth another look', (t) => {
  t.true(isTransient(new ApiException(503, 'unavailable', '', {})));
  t.true(isTransient(new ApiException(429, 'slow down', '', {})));
  t.false(isTransient(new ApiException(403, 'forbidden', '', {})));
  t.true(isTransient(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })));
  t.false(isTransient(new TypeError('x is undefined')));
});

test('an API error reads as the apiserver’s own sentence', (t) => {
  const body = JSON.stringify({ kind: 'Status', message: 'jobs.batch "x" is forbidden: User "u" cannot create' });
  t.is(errorLine(new ApiException(403, 'Forbidden', body, {})), 'HTTP 403: jobs.batch "x" is forbidden: User "u" cannot create');
  t.is(errorLine(new Error('plain')), 'plain');
});
