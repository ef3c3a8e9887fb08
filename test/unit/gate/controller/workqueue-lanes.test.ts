// The work queue's two lanes: what happened to a key goes before what a timer brought back, the
// timers' lane still gets every SCHEDULED_TURN-th pick, and a key in both is queued once.
import test from 'ava';
import { SCHEDULED_TURN, WorkQueue } from '../../../../gate/controller/workqueue.ts';

async function take(queue: WorkQueue, n: number): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = (await queue.get()) as string;
    queue.done(key);
    keys.push(key);
  }
  return keys;
}

test('a key something happened to is taken before keys its timers brought back', async (t) => {
  const queue = new WorkQueue();
  for (const k of ['ns/resend-1', 'ns/resend-2']) queue.addAfter(k, 0);
  queue.add('ns/answered');
  t.deepEqual(await take(queue, 3), ['ns/answered', 'ns/resend-1', 'ns/resend-2']);
  queue.shutdown();
});

test('the timers lane is never starved: it gets one pick in SCHEDULED_TURN', async (t) => {
  const queue = new WorkQueue();
  for (let i = 0; i < 10; i++) queue.addAfter(`ns/resend-${i}`, 0);
  for (let i = 0; i < 10; i++) queue.add(`ns/new-${i}`);
  const order = await take(queue, 2 * SCHEDULED_TURN);
  t.is(order.filter((k) => k.includes('resend')).length, 2);
  t.is(order[SCHEDULED_TURN - 1], 'ns/resend-0');
  queue.shutdown();
});

test('a scheduled key something happens to moves to the first lane, queued once', async (t) => {
  const queue = new WorkQueue();
  for (const k of ['ns/a', 'ns/b', 'ns/c']) queue.addAfter(k, 0);
  queue.add('ns/c');
  queue.add('ns/c');
  queue.addAfter('ns/c', 0);
  t.is(queue.length, 3);
  t.deepEqual(await take(queue, 3), ['ns/c', 'ns/a', 'ns/b']);
  queue.shutdown();
});

test('busy while the first lane has a key waiting or being processed; quiet once it is done, whatever the timers lane holds', async (t) => {
  const queue = new WorkQueue();
  const told: boolean[] = [];
  queue.onBusy = (busy) => told.push(busy);
  queue.addAfter('ns/resend', 0);
  t.false(queue.busy, 'a timer brought it back: not urgent');
  queue.add('ns/answered');
  t.true(queue.busy);
  const key = await queue.get();
  t.is(key, 'ns/answered');
  t.true(queue.busy, 'still being decided');
  queue.done(key as string);
  t.false(queue.busy, 'the resend still waits, and does not count');
  t.deepEqual(told, [true, false], 'told once each way');
  queue.shutdown();
});
