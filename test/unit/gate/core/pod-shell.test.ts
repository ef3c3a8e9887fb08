import test from 'ava';
import type { BindingView, Candidate } from '../../../../gate/core/broker-namespace.ts';
import { hookedNamespaces, REASON_SHELL_CLOSED, REASON_SHELL_OPEN, shellCandidates, shellReport } from '../../../../gate/core/pod-shell.ts';

const TRUSTED = ['knative-prestart', 'knative-eventing', 'kube-system'];
const rb = (name: string, subjects: BindingView['subjects'], namespace = 'shop'): BindingView => ({
  kind: 'RoleBinding',
  name,
  namespace,
  subjects,
});
const crb = (name: string, subjects: BindingView['subjects']): BindingView => ({ kind: 'ClusterRoleBinding', name, subjects });

test('the namespace’s own tenants are candidates: its Users, Groups and ServiceAccounts; outsiders from any binding too', (t) => {
  const found = shellCandidates(
    'shop',
    [
      rb('edit', [
        { kind: 'User', name: 'alice' },
        { kind: 'Group', name: 'shop-devs' },
        { kind: 'ServiceAccount', name: 'ci' },
      ]),
      rb('elsewhere', [{ kind: 'User', name: 'bob' }], 'other'),
      crb('admins', [
        { kind: 'User', name: 'root' },
        { kind: 'Group', name: 'system:masters' },
      ]),
      crb('discovery', [{ kind: 'Group', name: 'system:authenticated' }]),
      crb('deployer', [{ kind: 'ServiceAccount', name: 'deployer', namespace: 'tools' }]),
    ],
    TRUSTED,
  );
  t.deepEqual(
    found.map((c) => [c.key, c.namedIn.join(', ')]),
    [
      ['Group shop-devs', 'RoleBinding shop/edit'],
      ['Group system:authenticated', 'ClusterRoleBinding discovery'],
      ['ServiceAccount shop/ci', 'RoleBinding shop/edit'],
      ['ServiceAccount tools/deployer', 'ClusterRoleBinding deployer'],
      ['User alice', 'RoleBinding shop/edit'],
    ],
    'bob is another namespace’s; root and system:masters are only cluster-wide (the admins)',
  );
  const alice = found.find((c) => c.key === 'User alice');
  t.like(alice, { user: 'alice', kind: 'User' });
});

test('the gate’s and the platform’s ServiceAccounts are never candidates, also when named as Users', (t) => {
  const found = shellCandidates(
    'shop',
    [
      rb('gate', [
        { kind: 'ServiceAccount', name: 'knative-prestart-gate', namespace: 'knative-prestart' },
        { kind: 'User', name: 'system:serviceaccount:kube-system:replicaset-controller' },
        { kind: 'User', name: 'system:serviceaccount:shop:app' },
      ]),
    ],
    TRUSTED,
  );
  t.deepEqual(
    found.map((c) => c.key),
    ['ServiceAccount shop/app'],
  );
});

test('hooked namespaces: those of the runs, once each, sorted', (t) => {
  t.deepEqual(hookedNamespaces(['shop', 'api', 'shop']), ['api', 'shop']);
});

const alice: Candidate = { kind: 'User', key: 'User alice', user: 'alice', groups: [], namedIn: ['RoleBinding shop/edit'] };

test('a finding is told once: a Warning when it appears or changes, a Normal when it goes away; a failed check keeps what was told', (t) => {
  const first = shellReport(['shop'], new Map([['shop', { open: [alice] }]]), new Map());
  t.deepEqual(first.gauges, [{ namespace: 'shop', value: 1 }]);
  t.is(first.events.length, 1);
  t.like(first.events[0], { namespace: 'shop', type: 'Warning', reason: REASON_SHELL_OPEN });
  t.regex(
    first.events[0]?.message ?? '',
    /Namespace shop has Revisions under pre-start hooks, and 1 subject may exec or attach into its pods: User alice \(named in RoleBinding shop\/edit\)\. .*take pods\/exec and pods\/attach from them/,
  );

  const again = shellReport(['shop'], new Map([['shop', { open: [alice] }]]), first.told);
  t.deepEqual(again.events, [], 'the same finding is not told twice');

  const failed = shellReport(['shop'], new Map([['shop', { error: 'boom' }]]), again.told);
  t.deepEqual(failed.gauges, [{ namespace: 'shop', value: -1 }]);
  t.deepEqual(failed.events, []);
  t.is(failed.told.get('shop'), 'User alice', 'what was told is kept');

  const closed = shellReport(['shop'], new Map([['shop', { open: [] }]]), failed.told);
  t.deepEqual(closed.gauges, [{ namespace: 'shop', value: 0 }]);
  t.like(closed.events[0], { type: 'Normal', reason: REASON_SHELL_CLOSED });

  const quiet = shellReport(['api'], new Map([['api', { open: [] }]]), new Map());
  t.deepEqual(quiet.events, [], 'a namespace nobody may exec into says nothing');
});
