// The work queue reports adds, waits and backoff retries, like knative/pkg's workqueue metrics.
import test from 'ava';
import { WorkQueue } from '../../../../gate/controller/workqueue.ts';

test('adds, waits and retries are reported; a key already waiting is not added twice', async (t) => {
  const seen = { added: 0, waited: [] as number[], retried: 0 };
  const queue = new WorkQueue();
  queue.instruments = { added: () => seen.added++, waited: (ms) => seen.waited.push(ms), retried: () => seen.retried++ };
  queue.add('ns/a');
  queue.add('ns/a');
  queue.add('ns/b');
  t.is(queue.length, 2);
  t.is(await queue.get(), 'ns/a');
  queue.done('ns/a');
  queue.addRateLimited('ns/a');
  t.is(await queue.get(), 'ns/b');
  t.deepEqual([seen.added, seen.waited.length, seen.retried], [2, 2, 1]);
  t.true(seen.waited.every((ms) => ms >= 0));
  queue.shutdown();
});
