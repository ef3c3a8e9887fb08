import test from 'ava';
import { parseArgs } from '../../../examples/quickstart/args.ts';

test('arguments: --exit-when-done or QUICKSTART_EXIT_WHEN_DONE=1, a timeout in seconds, unknown flags refused', (t) => {
  t.deepEqual(parseArgs([], {}), { ok: true, options: { exitWhenDone: false, timeoutMs: 300_000, provisionMs: 8000, broker: false } });
  t.true(
    parseArgs(['--exit-when-done'], {}).ok &&
      (parseArgs(['--exit-when-done'], {}) as { options: { exitWhenDone: boolean } }).options.exitWhenDone,
  );
  t.like(parseArgs([], { QUICKSTART_EXIT_WHEN_DONE: '1' }), { ok: true, options: { exitWhenDone: true } });
  t.like(parseArgs(['--timeout', '90', '--provision-ms=2000'], {}), { ok: true, options: { timeoutMs: 90_000, provisionMs: 2000 } });
  t.deepEqual(parseArgs(['--timeout', 'soon'], {}), { ok: false, help: false, error: '--timeout needs a positive number, got "soon"' });
  t.deepEqual(parseArgs(['--exit-when-don'], {}), { ok: false, help: false, error: 'unknown argument "--exit-when-don"' });
  t.deepEqual(parseArgs(['--help'], {}), { ok: false, help: true });
});

test('--broker (or QUICKSTART_BROKER=1) sends the demo through the Broker', (t) => {
  t.like(parseArgs(['--broker'], {}), { ok: true, options: { broker: true } });
  t.like(parseArgs([], { QUICKSTART_BROKER: '1' }), { ok: true, options: { broker: true } });
  t.like(parseArgs([], {}), { ok: true, options: { broker: false } });
});
