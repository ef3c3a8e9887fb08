import test from 'ava';
import { HookSpecError, snapshotHook } from '../../../../gate/core/snapshot.ts';
import { hook } from './_builders.ts';

test('durations become seconds and the spec values are kept', (t) => {
  const h = hook('db', {
    order: 3,
    timeout: '1h30m',
    resendInterval: '500ms',
    failurePolicy: 'Ignore',
    allowed: ['env', 'volume'],
    params: { size: 'small' },
  });
  t.deepEqual(snapshotHook(h), {
    name: 'db',
    order: 3,
    timeoutSeconds: 5400,
    resendIntervalSeconds: 0.5,
    failurePolicy: 'Ignore',
    allowedContributions: ['env', 'volume'],
    delivery: h.spec.delivery,
    params: { size: 'small' },
  });
});

test('no contributions are allowed unless the hook says so', (t) => {
  const s = snapshotHook(hook('db'));
  t.deepEqual(s.allowedContributions, []);
  t.false('params' in s);
});

test('a snapshot does not change when the hook is edited later', (t) => {
  const h = hook('db', { params: { size: 'small' }, allowed: ['env'] });
  const s = snapshotHook(h);
  (h.spec.params as Record<string, unknown>).size = 'large';
  h.spec.contributions?.allowed.push('volume');
  h.spec.delivery.url = 'http://127.0.0.1:9/elsewhere';
  t.deepEqual(s.params, { size: 'small' });
  t.deepEqual(s.allowedContributions, ['env']);
  t.is(s.delivery.url, 'http://127.0.0.1:9/db');
});

test('bad durations name the hook and the field', (t) => {
  const err = t.throws(() => snapshotHook(hook('db', { timeout: 'soon' })), { instanceOf: HookSpecError });
  t.regex(err?.message ?? '', /PrestartHook db is invalid: timeout: invalid duration "soon"/);
  t.throws(() => snapshotHook(hook('db', { timeout: '0s' })), { message: /timeout must be positive/ });
  t.throws(() => snapshotHook(hook('db', { resendInterval: '-1s' })), { message: /resendInterval must not be negative/ });
  t.is(snapshotHook(hook('db', { resendInterval: '0' })).resendIntervalSeconds, 0);
});
