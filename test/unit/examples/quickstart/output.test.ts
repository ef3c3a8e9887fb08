import test from 'ava';
import { changes, logText } from '../../../../examples/quickstart/live.ts';
import { clock, fitWidth } from '../../../../examples/quickstart/output.ts';
import { lookAround, PhaseClock, seconds } from '../../../../examples/quickstart/summary.ts';
import type { ViewLine } from '../../../../examples/quickstart/view.ts';

const line = (key: string, text: string, context?: string): ViewLine => ({
  key,
  text,
  mark: 'wait',
  indent: 0,
  ...(context ? { context } : {}),
});

test('a plain log prints a line only when its text changed, and says when an object went away', (t) => {
  const before = new Map([
    ['revision/demo-00001', 'Revision demo-00001: held'],
    ['pod/p1', 'Pod p1: Running, Ready'],
  ]);
  const { changed, gone } = changes(before, [
    line('revision/demo-00001', 'Revision demo-00001: held'),
    line('run/demo-00001/hook/demo-db', 'hook demo-db: Requested 25%', 'PrestartRun demo-00001'),
  ]);
  t.deepEqual(changed.map(logText), ['PrestartRun demo-00001: hook demo-db: Requested 25%'], 'new or changed lines only, owners named');
  t.deepEqual(gone, ['Pod p1']);
});

test('a redrawn line is cut to the terminal width, escape sequences taking no room', (t) => {
  t.is(fitWidth('short', 10), 'short');
  t.is(fitWidth('abcdefghijkl', 6), 'abcde…\x1b[0m');
  const colored = '\x1b[32m✔\x1b[0m abcdefghij';
  t.is(fitWidth(colored, 6), '\x1b[32m✔\x1b[0m abc…\x1b[0m');
});

test('log timestamps are local wall-clock time with milliseconds', (t) => {
  t.is(clock(new Date(2026, 0, 2, 3, 4, 5, 6)), '03:04:05.006');
});

test('phase times: each phase run, unfinished ones marked, and the total', (t) => {
  const phases = new PhaseClock();
  phases.start('binaries', 0);
  phases.end('binaries', 400);
  phases.start('control plane', 400);
  phases.end('control plane', 5400);
  phases.start('Knative', 5400);
  t.is(phases.summary(9400), 'binaries 0.4s, control plane 5.0s, Knative 4.0s (unfinished); total 9.4s');
  t.is(seconds(37 * 60_000 + 27_000), '37m27s', 'long ones in minutes');
});

test('the look-around: exports and commands ready to paste, with the cached kubectl', (t) => {
  const lines = lookAround({
    kubeconfig: '/tmp/knative-prestart-clusters/quickstart-x/admin.kubeconfig',
    kubectl: '/home/me/.cache/knative-prestart/bin/kubernetes-v1.34.4/kubectl',
    clusterDir: '/tmp/knative-prestart-clusters/quickstart-x',
    namespace: 'demo',
    service: 'demo',
    revision: 'demo-00001',
    hook: 'demo-db',
    logs: ['/tmp/knative-prestart-clusters/quickstart-x/gate.log'],
  });
  t.true(lines.includes('  export KUBECONFIG=/tmp/knative-prestart-clusters/quickstart-x/admin.kubeconfig'));
  t.true(lines.some((l) => l.startsWith('  export PATH=/home/me/.cache/knative-prestart/bin/kubernetes-v1.34.4:"$PATH"')));
  for (const command of ['kubectl get prestartrun -n demo', 'kubectl describe revision demo-00001 -n demo', 'kubectl get ksvc -n demo']) {
    t.true(
      lines.some((l) => l.startsWith(`  ${command}`)),
      command,
    );
  }
  const odd = lookAround({
    kubeconfig: "/tmp/it's here/admin.kubeconfig",
    kubectl: '/k/kubectl',
    clusterDir: '/tmp',
    namespace: 'demo',
    service: 'demo',
    revision: 'demo-00001',
    hook: 'demo-db',
    logs: [],
  });
  t.true(odd.includes(`  export KUBECONFIG='/tmp/it'\\''s here/admin.kubeconfig'`), 'paths that need it are quoted for the shell');
});
