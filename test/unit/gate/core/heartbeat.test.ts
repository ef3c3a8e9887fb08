// Heartbeats: a hook with a heartbeatTimeout must send progress replies at least that often; each
// one (even unchanged) restarts the clock, silence times it out long before its `timeout`.
import test from 'ava';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import { snapshotHook } from '../../../../gate/core/snapshot.ts';
import type { Observed } from '../../../../gate/core/types.ts';
import { answer, apply, at, heldRevision, hook, observed } from './_builders.ts';

const longHook = () => hook('train', { timeout: '6h', heartbeatTimeout: '2m', resendInterval: '0s' });

/** The run created at 1s, train asked with it. */
function requested(): Observed {
  const o = observed(heldRevision(['train']), [longHook()], { now: at(1) });
  return apply(o, decideRevision(o).actions);
}

const step = (o: Observed, seconds: number) => {
  const now = { ...o, now: at(seconds) };
  const d = decideRevision(now);
  return { d, o: apply(now, d.actions) };
};

test('each progress reply, even an unchanged one, extends the heartbeat; the wake-up comes at its end', (t) => {
  let o = requested();
  t.is(step(o, 60).d.requeueAfterMs, 61_000, 'the heartbeat (1+120 s) comes before the 6h deadline');
  o = answer({ ...o, now: at(100) }, 'train', { outcome: 'progress', progress: 5, message: 'epoch 1' });
  o = answer({ ...o, now: at(200) }, 'train', { outcome: 'progress', progress: 5, message: 'epoch 1' });
  t.is(o.run?.status?.hooks[0]?.lastProgressAt, at(200).toISOString());
  const still = step(o, 310);
  t.is(still.o.run?.status?.hooks[0]?.phase, 'Requested');
  t.is(still.d.requeueAfterMs, 10_000);
});

test('silent longer than heartbeatTimeout: TimedOut with a message that says so, and the run fails', (t) => {
  let o = requested();
  o = answer({ ...o, now: at(30) }, 'train', { outcome: 'progress', progress: 1 });
  const timedOut = step(o, 151).o;
  t.like(timedOut.run?.status?.hooks[0], {
    phase: 'TimedOut',
    message: `no sign of life within 2m (heartbeatTimeout) since its last progress report at ${at(30).toISOString()}`,
  });
  t.is(timedOut.run?.status?.phase, 'Failed');
});

test('without progress the clock runs from the request; without heartbeatTimeout nothing changes', (t) => {
  t.is(step(requested(), 121).o.run?.status?.hooks[0]?.phase, 'TimedOut');
  t.is(snapshotHook(hook('x')).heartbeatTimeoutSeconds, undefined);
  t.throws(() => snapshotHook(hook('x', { heartbeatTimeout: '0s' })), { message: /heartbeatTimeout must be positive/ });
});
