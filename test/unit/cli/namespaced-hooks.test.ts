// `kn prestart plan` and `kn prestart get` with a team's own hooks (NamespacedPrestartHook) beside
// the admin's: shown after them, as the namespace's own, and never for another namespace.
import test from 'ava';
import type { RunObject } from '../../../api/resources.ts';
import type { NamespacedPrestartHookSpec, PrestartHook } from '../../../api/types.ts';
import { renderPlan, type ServiceLike } from '../../../cli/prestart/plan.ts';
import { renderRunTree } from '../../../cli/prestart/render.ts';
import { namespacedHook } from '../../../gate/core/namespaced-hooks.ts';

const admin: PrestartHook = {
  name: 'scan',
  generation: 1,
  spec: {
    match: {},
    order: 50,
    timeout: '10m',
    failurePolicy: 'Fail',
    resendInterval: '30s',
    delivery: { transport: 'http', url: 'http://x/' },
  },
};
const teamSpec: NamespacedPrestartHookSpec = {
  match: {},
  order: 0,
  timeout: '5m',
  failurePolicy: 'Ignore',
  resendInterval: '30s',
  delivery: { transport: 'http', service: { name: 'migrator' } },
};
const team = (namespace: string) => namespacedHook({ namespace, name: 'migrate', generation: 1, spec: teamSpec }, 'cluster.local');
const service: ServiceLike = {
  kind: 'Service',
  metadata: { name: 'checkout', namespace: 'shop' },
  spec: { template: { spec: { containers: [{ image: 'dev.local/checkout' }] } } },
};

test("plan lists the namespace's own hooks after the admin's, and another namespace's as not applied", (t) => {
  const text = renderPlan(service, 'shop', {}, [team('shop'), admin, team('billing')]);
  const lines = text.split('\n');
  const scan = lines.findIndex((l) => l.startsWith('  scan '));
  const mine = lines.findIndex((l) => l.startsWith('  shop/migrate '));
  t.true(scan > 0 && mine > scan, text);
  t.regex(lines[mine] ?? '', /the namespace's own hook, after every PrestartHook; order 0/);
  t.regex(lines[mine] ?? '', /every Revision of shop$/);
  t.regex(text, /Not applied:\n {2}billing\/migrate: a hook of namespace billing/);
});

test("get shows a run's team hooks as their own stage, after the admin's", (t) => {
  const snapshot = (name: string, order: number) => ({
    name,
    order,
    timeoutSeconds: 600,
    resendIntervalSeconds: 30,
    failurePolicy: 'Fail' as const,
    allowedContributions: [],
    delivery: { transport: 'http' as const, url: 'http://x/' },
  });
  const run: RunObject = {
    metadata: { name: 'checkout-00002', namespace: 'shop' },
    spec: { revisionUID: 'u', hooks: [snapshot('shop/migrate', 0), snapshot('scan', 50)] },
    status: {
      phase: 'Running',
      hooks: [
        { name: 'shop/migrate', phase: 'Pending', attempt: 1 },
        { name: 'scan', phase: 'Requested', attempt: 1 },
      ],
      conditions: [],
      summary: '0/2',
    },
  };
  const text = renderRunTree(run, new Date());
  const admin = text.indexOf('order 50');
  const own = text.indexOf("shop's own hooks, order 0 (after every PrestartHook)");
  t.true(admin > 0 && own > admin, text);
});

test("plan says who stamps a team's hooks where the apiserver stamps the admin's", (t) => {
  const text = renderPlan(service, 'shop', {}, [admin, team('shop')], 'apiserver');
  t.regex(text, /Stamped by the apiserver/);
  t.regex(text, /The namespace's own hooks are stamped by the gate's webhook/);
  t.notRegex(renderPlan(service, 'shop', {}, [admin], 'apiserver'), /namespace's own hooks/);
});
