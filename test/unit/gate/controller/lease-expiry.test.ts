// The lease expiry rule (client-go's): a follower judges a lease by the local time at which it
// last saw the record change, never by the holder's renewTime, so a follower whose clock runs
// ahead of the leader's cannot steal a live lease.
import test from 'ava';
import { LeaseObserver } from '../../../../gate/controller/leader.ts';

const LEASE_MS = 15_000;
const record = (renewTime: string, holder = 'gate-a') => ({
  holderIdentity: holder,
  renewTime: new Date(renewTime),
  acquireTime: new Date('2026-01-01T00:00:00Z'),
  leaseTransitions: 3,
  leaseDurationSeconds: 15,
});

test('a lease renewed long ago by the holder’s clock is live while this replica keeps seeing it change', (t) => {
  const observer = new LeaseObserver();
  // The holder's clock is an hour behind: every renewTime is "expired" by the local wall clock.
  observer.observe(record('2026-01-01T00:00:05Z'), 0);
  t.false(observer.expired(LEASE_MS, 5_000));
  observer.observe(record('2026-01-01T00:00:10Z'), 5_000);
  observer.observe(record('2026-01-01T00:00:15Z'), 10_000);
  t.false(observer.expired(LEASE_MS, 24_000), 'one lease duration has not passed since the last change seen');
});

test('a lease expires one lease duration after the last change this replica saw, on its own clock', (t) => {
  const observer = new LeaseObserver();
  observer.observe(record('2026-01-01T00:00:05Z'), 1_000);
  observer.observe(record('2026-01-01T00:00:10Z'), 6_000);
  // Read again, unchanged: the holder stopped renewing.
  observer.observe(record('2026-01-01T00:00:10Z'), 12_000);
  observer.observe(record('2026-01-01T00:00:10Z'), 20_000);
  t.false(observer.expired(LEASE_MS, 21_000));
  t.true(observer.expired(LEASE_MS, 21_001));
});

test('a replica that has just started waits a full lease duration, however old the renewTime', (t) => {
  const observer = new LeaseObserver();
  t.false(observer.expired(LEASE_MS, 1_000_000), 'nothing observed yet: not expired');
  observer.observe(record('2020-01-01T00:00:00Z'), 1_000_000);
  t.false(observer.expired(LEASE_MS, 1_000_000 + LEASE_MS));
  t.true(observer.expired(LEASE_MS, 1_000_000 + LEASE_MS + 1));
});

test('a new holder is a change: it restarts the wait', (t) => {
  const observer = new LeaseObserver();
  observer.observe(record('2026-01-01T00:00:10Z', 'gate-a'), 0);
  observer.observe(record('2026-01-01T00:00:10Z', 'gate-b'), 14_000);
  t.false(observer.expired(LEASE_MS, 20_000));
  t.true(observer.expired(LEASE_MS, 29_001));
});
