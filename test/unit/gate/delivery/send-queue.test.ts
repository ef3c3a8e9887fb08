// Sends leave the reconcile workers and run a few at a time per hook (gate/delivery/send-queue.ts): a hook
// that never answers holds its own slots and no other hook's, one request per Revision and hook
// waits at a time, and an answer is handed over only while no action list of that Revision runs.
import test from 'ava';
import { type SendJob, SendQueue } from '../../../../gate/delivery/send-queue.ts';
import { ObjectLocks } from '../../../../gate/runtime/object-locks.ts';

/** A job that runs until released; records when it started. */
function gatedJob(hook: string, key: string, started: string[]) {
  let release: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    release = resolve;
  });
  const job: SendJob = {
    lane: hook,
    key,
    run: async () => {
      started.push(key);
      await done;
    },
  };
  return { job, release };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test('a hook that never answers takes its own slots only: the other hooks still send', async (t) => {
  const queue = new SendQueue({ perHook: 2, overall: 4 });
  const started: string[] = [];
  const hung = Array.from({ length: 1000 }, (_, i) => gatedJob('hung', `ns/rev-${i}/hung/start`, started));
  for (const { job } of hung) queue.add(job);
  const healthy = gatedJob('healthy', 'ns/web-1/healthy/start', started);
  queue.add(healthy.job);
  await tick();
  t.deepEqual(started, ['ns/rev-0/hung/start', 'ns/rev-1/hung/start', 'ns/web-1/healthy/start']);
  t.is(queue.sending, 3);
  t.is(queue.waiting, 998);
  healthy.release();
  for (const { release } of hung) release();
  await queue.idle();
  t.is(started.length, 1001);
});

test('when slots are scarce, the hooks with work take them in turns', async (t) => {
  const queue = new SendQueue({ perHook: 10, overall: 1 });
  const started: string[] = [];
  const blocker = gatedJob('x', 'ns/x/x/start', started);
  queue.add(blocker.job);
  for (const [i, hook] of ['a', 'a', 'a', 'b', 'b', 'c'].entries()) {
    queue.add({ lane: hook, key: `ns/r${i}/${hook}/start`, run: async () => void started.push(`ns/r${i}/${hook}/start`) });
  }
  blocker.release();
  await queue.idle();
  t.deepEqual(started, [
    'ns/x/x/start',
    'ns/r0/a/start',
    'ns/r3/b/start',
    'ns/r5/c/start',
    'ns/r1/a/start',
    'ns/r4/b/start',
    'ns/r2/a/start',
  ]);
});

test('a send waiting under the same key is replaced in place, not queued twice', async (t) => {
  const queue = new SendQueue({ perHook: 1, overall: 1 });
  const started: string[] = [];
  const first = gatedJob('db', 'ns/busy/db/start', started);
  queue.add(first.job);
  const ran: string[] = [];
  const waiting = (deadline: string): SendJob => ({
    lane: 'db',
    key: 'ns/web/db/start',
    run: async () => {
      ran.push(deadline);
    },
  });
  queue.add(waiting('old deadline'));
  queue.add({ lane: 'db', key: 'ns/other/db/start', run: async () => void ran.push('other') });
  queue.add(waiting('new deadline'));
  t.is(queue.waiting, 2);
  first.release();
  await queue.idle();
  t.deepEqual(ran, ['new deadline', 'other']);
});

test('clear() drops what waits; what is sending finishes', async (t) => {
  const queue = new SendQueue({ perHook: 1, overall: 1 });
  const started: string[] = [];
  const sending = gatedJob('db', 'ns/a/db/start', started);
  const waiting = gatedJob('db', 'ns/b/db/start', started);
  queue.add(sending.job);
  queue.add(waiting.job);
  queue.clear();
  t.is(queue.waiting, 0);
  sending.release();
  await queue.idle();
  t.deepEqual(started, ['ns/a/db/start']);
});

test('a failing send frees its slot', async (t) => {
  const queue = new SendQueue({ perHook: 1, overall: 1 });
  const ran: string[] = [];
  queue.add({ lane: 'db', key: 'k1', run: async () => Promise.reject(new Error('boom')) });
  queue.add({ lane: 'db', key: 'k2', run: async () => void ran.push('k2') });
  await queue.idle();
  t.deepEqual(ran, ['k2']);
});

test('what runs under one key runs alone, in the order it asked; other keys do not wait', async (t) => {
  const locks = new ObjectLocks();
  const log: string[] = [];
  let releaseList: () => void = () => undefined;
  const list = locks.exclusive('ns/web', async () => {
    log.push('list starts');
    await new Promise<void>((resolve) => {
      releaseList = resolve;
    });
    log.push('list ends');
  });
  const answer = locks.exclusive('ns/web', async () => {
    log.push('answer taken');
  });
  const other = locks.exclusive('ns/other', async () => {
    log.push('other key');
  });
  await other;
  await tick();
  t.deepEqual(log, ['list starts', 'other key']);
  releaseList();
  await Promise.all([list, answer]);
  t.deepEqual(log, ['list starts', 'other key', 'list ends', 'answer taken']);
});

test('a failed action list releases its lock', async (t) => {
  const locks = new ObjectLocks();
  await t.throwsAsync(locks.exclusive('k', async () => Promise.reject(new Error('409'))));
  t.is(await locks.exclusive('k', async () => 'next'), 'next');
});

test('two jobs of one key never run at once: the second waits for the first, others pass it', async (t) => {
  const queue = new SendQueue({ perHook: 4, overall: 4 });
  const started: string[] = [];
  const first = gatedJob('db', 'ns/web/db/start', started);
  queue.add(first.job);
  const again = gatedJob('db', 'ns/web/db/start', started);
  queue.add(again.job);
  const other = gatedJob('db', 'ns/api/db/start', started);
  queue.add(other.job);
  await tick();
  t.deepEqual(started, ['ns/web/db/start', 'ns/api/db/start'], 'the resend waits for the send before it');
  first.release();
  await tick();
  await tick();
  t.deepEqual(started, ['ns/web/db/start', 'ns/api/db/start', 'ns/web/db/start']);
  again.release();
  other.release();
  await queue.idle();
});
