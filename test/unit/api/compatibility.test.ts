import { readFileSync } from 'node:fs';
import test from 'ava';
import { judgeCluster, minorOf, SUPPORTED_RANGE } from '../../../api/compatibility.ts';

const doc = (path: string) => readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8');

test('docs/compatibility.md states the range the gate enforces', (t) => {
  t.true(doc('docs/compatibility.md').includes(`\nSupported range: ${SUPPORTED_RANGE}.\n`));
});

test("the README's requirement line is the same range", (t) => {
  t.regex(doc('README.md').replaceAll('\n', ' '), /Needs Kubernetes 1\.34–1\.37 with Knative Serving 1\.23 or 1\.24/);
  t.is(SUPPORTED_RANGE, 'Kubernetes 1.34–1.37 with Knative Serving 1.23–1.24');
});

test('versions as Kubernetes distributions and Knative write them', (t) => {
  t.is(minorOf('v1.36.3'), 36);
  t.is(minorOf('v1.36.3+k3s1'), 36);
  t.is(minorOf('v1.36.3-gke.100'), 36);
  t.is(minorOf('1.24.0'), 24);
  t.is(minorOf('v1.24.0'), 24);
  t.is(minorOf('devel'), undefined);
  t.is(minorOf(''), undefined);
  t.is(minorOf('v2.1.0'), undefined);
});

test('inside the range: supported; a Knative that names no release: supported with a warning', (t) => {
  t.deepEqual(judgeCluster({ kubernetes: 'v1.36.3', knativeServing: '1.24.0' }), { supported: true });
  t.deepEqual(judgeCluster({ kubernetes: 'v1.34.4', knativeServing: 'v1.23.0' }), { supported: true });
  const devel = judgeCluster({ kubernetes: 'v1.37.2', knativeServing: 'devel' });
  t.true(devel.supported);
  t.regex((devel as { warning?: string }).warning ?? '', /Knative Serving's release is unknown/);
});

test('outside the range: refused with one line naming the range', (t) => {
  for (const v of [
    { kubernetes: 'v1.33.9', knativeServing: '1.23.0' },
    { kubernetes: 'v1.38.0', knativeServing: '1.24.0' },
    { kubernetes: 'v1.36.3', knativeServing: '1.22.1' },
    { kubernetes: 'v1.36.3', knativeServing: '1.25.0' },
    { kubernetes: 'not-a-version', knativeServing: '1.24.0' },
  ]) {
    const verdict = judgeCluster(v);
    t.false(verdict.supported, JSON.stringify(v));
    const reason = (verdict as { reason: string }).reason;
    t.false(reason.includes('\n'));
    t.true(reason.endsWith('this release supports Kubernetes 1.34–1.37 with Knative Serving 1.23–1.24 (docs/compatibility.md)'), reason);
  }
});
