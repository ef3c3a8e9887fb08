// A team's hooks (NamespacedPrestartHook) as the core runs them: their own namespace only, after
// every admin hook, delivering only to their own Services, and failing closed on a spec that
// slipped past the CRD (an object stored before its rules).
import test from 'ava';
import type { NamespacedPrestartHookSpec, PrestartHook } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import { namespacedHook, runOrder, serviceOfAddress, targetProblem } from '../../../../gate/core/namespaced-hooks.ts';
import { stampRevision } from '../../../../gate/core/stamp.ts';
import { answer, apply, heldRevision, hook, hookPhases, observed, ofType, revision, storeStarted } from './_builders.ts';

const spec = (over: Partial<NamespacedPrestartHookSpec> = {}): NamespacedPrestartHookSpec => ({
  match: {},
  order: 0,
  timeout: '60s',
  failurePolicy: 'Fail',
  resendInterval: '20s',
  delivery: { transport: 'http', service: { name: 'migrate', port: 8080, path: '/hooks' } },
  ...over,
});
const team = (name: string, over: Partial<NamespacedPrestartHookSpec> = {}, namespace = 'team-a'): PrestartHook =>
  namespacedHook({ namespace, name, generation: 1, spec: spec(over) }, 'cluster.local');

test("a team's hook is named <namespace>/<name>, sends to its own Service and answers as its own namespace's ServiceAccount", (t) => {
  const h = team('migrate', { identity: { serviceAccount: { name: 'migrator' } } });
  t.is(h.name, 'team-a/migrate');
  t.is(h.namespace, 'team-a');
  t.is(h.problem, undefined);
  t.deepEqual(h.spec.delivery, { transport: 'http', url: 'http://migrate.team-a.svc.cluster.local:8080/hooks' });
  t.deepEqual(h.spec.identity, { serviceAccount: { namespace: 'team-a', name: 'migrator' } });
  t.deepEqual(team('retrying', { retryAfter: { maxDelay: '1m', maxRetries: 3 } }).spec.retryAfter, { maxDelay: '1m', maxRetries: 3 });
  const ksvc = team('warm', { delivery: { transport: 'http', knativeService: { name: 'warmer' } } });
  t.is(ksvc.spec.delivery.url, 'http://warmer.team-a.svc.cluster.local/');
});

test('a spec that slipped past the CRD is kept with the reason and never sent anywhere (fail closed)', (t) => {
  // Each as stored before the CRD's rules, or written around them.
  const raw = (delivery: unknown, extra: Record<string, unknown> = {}) =>
    namespacedHook(
      { namespace: 'team-a', name: 'x', generation: 1, spec: { ...spec(), delivery, ...extra } as NamespacedPrestartHookSpec },
      'cluster.local',
    );
  const cases: Array<[string, PrestartHook, RegExp]> = [
    ['a URL to 127.0.0.1', raw({ transport: 'http', url: 'http://127.0.0.1:8080/' }), /delivery\.url is not allowed/],
    ['a URL to the metadata address', raw({ transport: 'http', url: 'http://169.254.169.254/' }), /delivery\.url is not allowed/],
    ['a URL beside a Service', raw({ transport: 'http', url: 'https://kubernetes.default.svc/', service: { name: 'a' } }), /delivery\.url/],
    [
      "another namespace's Service",
      raw({ transport: 'http', service: { name: 'db', namespace: 'team-b' } }),
      /own namespace team-a, not team-b/,
    ],
    [
      'a dotted name reaching another namespace',
      raw({ transport: 'http', service: { name: 'kubernetes.default' } }),
      /not a DNS-1035 label/,
    ],
    ['a path that changes the host', raw({ transport: 'http', service: { name: 'a', path: '@169.254.169.254/' } }), /not an absolute path/],
    ['NATS', raw({ transport: 'nats', nats: { subject: 'prestart.requests.x' } }), /transport nats is not allowed/],
    ['a Broker', raw({ transport: 'broker', broker: { name: 'default', namespace: 'team-a' } }), /transport broker is not allowed/],
    ['no target', raw({ transport: 'http' }), /exactly one of/],
    [
      "another namespace's ServiceAccount",
      raw({ transport: 'http', service: { name: 'a' } }, { identity: { serviceAccount: { namespace: 'kube-system', name: 'x' } } }),
      /identity\.serviceAccount must be in the hook's own namespace/,
    ],
    [
      "the gate's token",
      raw({ transport: 'http', service: { name: 'a' } }, { identity: { audience: 'https://kubernetes.default.svc' } }),
      /audience/,
    ],
    [
      'a namespace selector',
      raw({ transport: 'http', service: { name: 'a' } }, { match: { namespaceSelector: {} } }),
      /namespaceSelector is not allowed/,
    ],
  ];
  for (const [what, h, reason] of cases) {
    t.regex(h.problem ?? '', reason, what);
    t.is(h.spec.delivery.url, undefined, `${what}: no address at all`);
  }
  // The run fails such a hook (closed), naming its kind and the reason.
  const bad = cases[0]?.[1] as PrestartHook;
  const o = observed(heldRevision([bad.name]), [bad]);
  const created = ofType(decide(o), 'createRun')[0];
  t.deepEqual(created?.requests, [], 'nothing is sent');
  t.like(created?.status.hooks[0], { name: 'team-a/x', phase: 'Failed' });
  t.regex(created?.status.hooks[0]?.message ?? '', /^NamespacedPrestartHook team-a\/x is invalid: delivery\.url is not allowed/);
});

test("a team's hook never applies to another namespace's Revisions, whatever its match", (t) => {
  const mine = team('migrate');
  const stampedHere = stampRevision(revision({ namespace: 'team-a' }), {}, [mine]);
  t.deepEqual(stampedHere.hookNames, ['team-a/migrate']);
  const stampedThere = stampRevision(revision({ namespace: 'team-b' }), {}, [mine]);
  t.deepEqual(stampedThere.hookNames, [], 'no hold in team-b');
});

test("a team's hooks run after every admin hook, whatever their order, and cannot lift an admin hook's hold", (t) => {
  const admin = hook('scan', { order: 100, failurePolicy: 'Fail' });
  const mine = team('migrate', { order: 0, failurePolicy: 'Ignore' });
  t.true(runOrder({ name: mine.name, order: 0 }) > runOrder({ name: admin.name, order: 100 }));
  const stamped = stampRevision(revision(), {}, [admin, mine]);
  t.deepEqual([...stamped.hookNames].sort(), ['scan', 'team-a/migrate']);

  const o0 = observed(heldRevision(['scan', 'team-a/migrate']), [admin, mine]);
  const first = storeStarted(apply(o0, decide(o0).actions));
  t.deepEqual(hookPhases(first), { scan: 'Requested', 'team-a/migrate': 'Pending' }, "the admin's hook first; the team's waits");

  // The admin's hook fails: the team's Ignore hook is never asked and releases nothing.
  const failed = answer(first, 'scan', { outcome: 'failed', message: 'CVE found' });
  const after = decide(failed);
  t.deepEqual(ofType(after, 'sendRequest'), [], "the team's hook is not asked");
  t.deepEqual(ofType(after, 'release'), []);
  t.is(ofType(after, 'updateRunStatus')[0]?.status.phase, 'Failed');

  // The admin's hook succeeds: now the team's is asked, and its answer releases.
  const passed = answer(first, 'scan');
  const next = decide(passed);
  t.deepEqual(
    ofType(next, 'sendRequest').map((s) => s.hook.name),
    ['team-a/migrate'],
  );
  const asked = apply(passed, next.actions);
  t.deepEqual(ofType(decide(answer(asked, 'team-a/migrate')), 'release').length, 1);
});

test("a namespace over the gate's limit: each of its hooks carries the reason, and a run fails it", (t) => {
  const h = namespacedHook({ namespace: 'team-a', name: 'x', generation: 1, spec: spec() }, 'cluster.local', 'over the limit');
  t.is(h.problem, 'over the limit');
  const created = ofType(decide(observed(heldRevision([h.name]), [h])), 'createRun')[0];
  t.regex(created?.status.hooks[0]?.message ?? '', /over the limit/);
});

test("the gate sends only to a Service of the namespace's pods, or the one Knative keeps for a Knative Service", (t) => {
  t.is(serviceOfAddress('http://migrate.team-a.svc.cluster.local:8080/x', 'team-a', 'cluster.local'), 'migrate');
  t.is(serviceOfAddress('http://migrate.team-b.svc.cluster.local/', 'team-a', 'cluster.local'), undefined, "another namespace's");
  t.is(serviceOfAddress('http://169.254.169.254/', 'team-a', 'cluster.local'), undefined);
  t.is(serviceOfAddress('http://a.b.team-a.svc.cluster.local/', 'team-a', 'cluster.local'), undefined, 'a dotted name');
  t.is(targetProblem('team-a', 'migrate', { type: 'ClusterIP' }, []), undefined);
  t.is(targetProblem('team-a', 'migrate', undefined, [])?.retriable, true, 'not found: it may come');
  const external = targetProblem('team-a', 'sneaky', { type: 'ExternalName', externalName: 'db.team-b.svc.cluster.local' }, []);
  t.false(external?.retriable);
  t.regex(external?.problem ?? '', /type ExternalName, which names another address \("db\.team-b\.svc\.cluster\.local"/);
  const route = { apiVersion: 'serving.knative.dev/v1', kind: 'Route', name: 'warmer' };
  const gateway = 'kourier-internal.kourier-system.svc.cluster.local';
  const knatives = { type: 'ExternalName', externalName: gateway, controller: route };
  t.is(targetProblem('team-a', 'warmer', knatives, [gateway]), undefined, "Knative's own: leads where Knative's ingress says");
  t.is(
    targetProblem('team-a', 'warmer', { ...knatives, externalName: 'KOURIER-internal.kourier-system.svc.cluster.local.' }, [gateway]),
    undefined,
  );
  // Everything a tenant may write can imitate Knative's own Service: only where it leads decides.
  const forged = { ...knatives, externalName: 'db.team-b.svc.cluster.local' };
  t.like(
    targetProblem('team-a', 'warmer', forged, [gateway]),
    { retriable: true },
    'controlled by a Route, leading elsewhere: asked again, never sent',
  );
  t.truthy(targetProblem('team-a', 'warmer', forged, []), 'no KIngress of that name');
  t.truthy(targetProblem('team-a', 'warmer', knatives, []), 'the gateway, but no KIngress says so');
  t.truthy(targetProblem('team-a', 'warmer', { ...knatives, controller: { ...route, name: 'other' } }, [gateway]), "another Route's");
  t.truthy(targetProblem('team-a', 'warmer', { ...knatives, externalName: undefined }, [gateway]), 'no name at all');
});
