// Events and conditions yield to the reconciles (issue 14): while something that happened waits
// to be decided they are not written, so a burst of releases is not queued at the apiserver
// behind them; a foreground that never rests still lets them through after maxYieldMs.
import test from 'ava';
import { BackgroundWrites } from '../../../../gate/controller/background-writes.ts';

function recorder(background: BackgroundWrites) {
  const written: string[] = [];
  let wrote: () => void = () => undefined;
  const event = (name: string) =>
    background.event(async () => {
      written.push(name);
      wrote();
    });
  const next = () =>
    new Promise<void>((resolve) => {
      wrote = resolve;
    });
  return { written, event, next };
}

test('an event waits while the foreground is busy and is written once it is quiet', async (t) => {
  const background = new BackgroundWrites(0, 60_000);
  const { written, event, next } = recorder(background);
  background.foreground(true);
  event('Released');
  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(written, [], 'nothing written while the foreground is busy');
  const done = next();
  background.foreground(false);
  await done;
  t.deepEqual(written, ['Released']);
  background.clear();
});

test('a foreground busy longer than maxYieldMs no longer holds the background back', async (t) => {
  const background = new BackgroundWrites(0, 20);
  const { written, event, next } = recorder(background);
  // The gate's timers are unref'd (they never keep a process up); this keeps the test's up.
  const alive = setInterval(() => undefined, 1_000);
  t.teardown(() => clearInterval(alive));
  background.foreground(true);
  const done = next();
  event('first');
  await done;
  t.deepEqual(written, ['first'], 'written once the yield ran out');
  const again = next();
  background.foreground(true); // still busy: no new yield until it has been quiet once
  event('second');
  await again;
  t.deepEqual(written, ['first', 'second']);
  background.clear();
});
