import test from 'ava';
import { parseArgs } from '../../../../examples/quickstart/args.ts';
import { buildTargets, chooseWhere } from '../../../../examples/quickstart/where.ts';

test('arguments: --exit-when-done or QUICKSTART_EXIT_WHEN_DONE=1, a timeout in seconds, unknown flags refused', (t) => {
  t.deepEqual(parseArgs([], {}), {
    ok: true,
    options: { exitWhenDone: false, timeoutMs: 300_000, provisionMs: 8000, broker: false, node: 'auto' },
  });
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

test('--node (or QUICKSTART_NODE) says where the pods run: auto by default, real or kwok; anything else is refused', (t) => {
  t.like(parseArgs(['--node', 'kwok'], {}), { ok: true, options: { node: 'kwok' } });
  t.like(parseArgs(['--node=real'], {}), { ok: true, options: { node: 'real' } });
  t.like(parseArgs([], { QUICKSTART_NODE: 'kwok' }), { ok: true, options: { node: 'kwok' } });
  t.like(parseArgs(['--node', 'kwok'], { QUICKSTART_NODE: 'real' }), { ok: true, options: { node: 'kwok' } }, 'the flag wins');
  t.deepEqual(parseArgs(['--node', 'fake'], {}), { ok: false, help: false, error: '--node is one of auto, real, kwok, got "fake"' });
  t.deepEqual(parseArgs([], { QUICKSTART_NODE: 'x' }), {
    ok: false,
    help: false,
    error: 'QUICKSTART_NODE is one of auto, real, kwok, got "x"',
  });
});

test('where the demo runs: the real node where it can, else kwok with one line saying why; --broker on kwok', (t) => {
  const noRoot = 'real node: needs root (containerd, the kubelet, the bridge and iptables change the host); use kwok nodes';
  t.deepEqual(chooseWhere('auto', false, undefined), { real: true });
  t.deepEqual(chooseWhere('auto', false, noRoot), {
    real: false,
    note: 'no real pods here (real node: needs root (containerd, the kubelet, the bridge and iptables change the host)): the demo runs on kwok nodes',
  });
  t.deepEqual(chooseWhere('real', false, noRoot), {
    error: 'real node: needs root (containerd, the kubelet, the bridge and iptables change the host)',
  });
  t.deepEqual(chooseWhere('kwok', false, undefined), { real: false });
  t.like(chooseWhere('auto', true, undefined), { real: false });
  t.true('error' in chooseWhere('real', true, undefined));
  t.deepEqual(buildTargets(true, false), ['etcd', 'kubernetes', 'knative-serving', 'node', 'knative-serving-images']);
  t.deepEqual(buildTargets(false, false), ['quickstart']);
  t.deepEqual(buildTargets(false, true), ['quickstart-broker']);
});
