// `kn prestart plan`: the hooks a new Revision would get, in order, why each matched and why the
// others did not, with the stamping webhook's own matching.
import test from 'ava';
import type { PrestartHook, PrestartHookSpec } from '../../../../api/types.ts';
import { nextRevisionOf, renderPlan, type ServiceLike, type Stamper } from '../../../../cli/prestart/plan.ts';

const hook = (name: string, spec: Partial<PrestartHookSpec>): PrestartHook => ({
  name,
  generation: 1,
  spec: {
    match: {},
    order: 0,
    timeout: '10m',
    failurePolicy: 'Fail',
    resendInterval: '30s',
    delivery: { transport: 'http', url: 'http://x/' },
    ...spec,
  },
});

const service: ServiceLike = {
  kind: 'Service',
  metadata: { name: 'checkout', namespace: 'shop' },
  spec: {
    template: {
      metadata: { annotations: { 'serving-binding': 'orders-db' }, labels: { tier: 'web' } },
      spec: { containers: [{ image: 'dev.local/checkout' }] },
    },
  },
};

const hooks = [
  hook('warm-cache', { order: 2, match: { revisionSelector: { matchLabels: { tier: 'web' } } }, heartbeatTimeout: '2m' }),
  hook('db', { order: 1, match: { annotation: { key: 'serving-binding', value: 'orders-db' } } }),
  hook('scan', { order: 1, mode: 'Audit', match: {} }),
  hook('approval', { match: { annotation: { key: 'needs-approval' } } }),
  hook('prod-only', { match: { namespaceSelector: { matchLabels: { env: 'prod' } } } }),
];

test('the next Revision carries the template’s labels and annotations and Knative’s labels', (t) => {
  const rev = nextRevisionOf(service, 'shop');
  t.like(rev.labels, { tier: 'web', 'serving.knative.dev/service': 'checkout', 'serving.knative.dev/configuration': 'checkout' });
  t.deepEqual(rev.annotations, { 'serving-binding': 'orders-db' });
});

test('the plan lists the applied hooks by order with why, then the others with why not', (t) => {
  t.is(
    renderPlan(service, 'shop', { 'kubernetes.io/metadata.name': 'shop' }, hooks),
    [
      'A new Revision of checkout in shop would be held for 3 hooks, in this order:',
      '  db (order 1, failurePolicy Fail, timeout 10m): annotation serving-binding=orders-db on the template',
      '  scan (order 1, Audit: never holds, timeout 10m): its match is empty: every Revision outside the system namespaces',
      '  warm-cache (order 2, failurePolicy Fail, timeout 10m, heartbeat 2m): Revision labels match tier=web',
      'Hooks of the same order run in parallel; a higher order starts once the lower ones passed.',
      'Not applied:',
      '  approval: no annotation needs-approval on the template',
      '  prod-only: namespace labels do not match env=prod',
    ].join('\n'),
  );
});

test('no hook applies: it would start at once', (t) => {
  t.is(renderPlan(service, 'shop', {}, []), 'A new Revision of checkout in shop would start at once: no PrestartHook applies.');
});

test('the plan says who stamps, and so what an outage of the gate does to the Revision', (t) => {
  const plan = (stamper: Stamper) => renderPlan(service, 'shop', {}, hooks, stamper).split('\n');
  t.true(
    plan('apiserver').includes(
      'Stamped by the apiserver (MutatingAdmissionPolicy prestart-stamp-revisions; the gate registers no Revision webhook): while no gate replica runs, it is admitted held and its hooks are asked once the gate is back.',
    ),
  );
  t.regex(
    plan('webhook').join('\n'),
    /^Stamped by the gate's webhook: while no gate replica runs, Knative's create of it is refused and retried/m,
  );
  t.regex(plan('unknown').join('\n'), /^Who stamps it is not known here: you may not read MutatingAdmissionPolicies\.$/m);
  t.false(renderPlan(service, 'shop', {}, [], 'webhook').includes('Stamped'), 'nothing to stamp, nothing said');
});
