// When the gate may not trust a cache: before its first successful list (readiness, webhooks), or
// once its watch has been failing for the allowed time (liveness, the Revision webhook).
import test from 'ava';
import { cacheProblems } from '../../../../gate/kube/caches.ts';

const NOW = 1_000_000;

test('a cache that never listed is a problem at once, with the reason the apiserver gave', (t) => {
  const problems = cacheProblems(
    [{ name: 'prestarthooks', listed: false, failingSince: NOW, lastError: 'HTTP 403: forbidden' }],
    NOW,
    30_000,
  );
  t.deepEqual(problems, ['prestarthooks: not listed yet: HTTP 403: forbidden']);
});

test('a listed cache whose watch fails is tolerated for the allowed time, then reported', (t) => {
  const failing = [{ name: 'namespaces', listed: true, failingSince: NOW - 29_999, lastError: 'Forbidden' }];
  t.deepEqual(cacheProblems(failing, NOW, 30_000), []);
  t.deepEqual(cacheProblems(failing, NOW + 1, 30_000), ['namespaces: watch failing for 30 s: Forbidden']);
});

test('readiness asks only for the first list (an infinite allowance)', (t) => {
  const health = [
    { name: 'revisions', listed: true, failingSince: 0 },
    { name: 'routes', listed: true },
  ];
  t.deepEqual(cacheProblems(health, NOW, Number.POSITIVE_INFINITY), []);
});
