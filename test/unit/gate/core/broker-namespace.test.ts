import test from 'ava';
import type { PrestartHook } from '../../../../api/types.ts';
import {
  type BindingView,
  brokerReport,
  brokersInUse,
  type Candidate,
  candidateSubjects,
  closedMessage,
  coveredByOpenGroup,
  GROUP_PROBE_USER,
  groupsFirst,
  memoryKey,
  openMessage,
  PLATFORM_NAMESPACES,
  REASON_CLOSED,
  REASON_OPEN,
} from '../../../../gate/core/broker-namespace.ts';

const TRUSTED = ['knative-prestart', ...PLATFORM_NAMESPACES];

function hook(name: string, delivery: PrestartHook['spec']['delivery']): PrestartHook & { uid: string } {
  return {
    name,
    uid: `uid-${name}`,
    generation: 1,
    spec: { match: {}, order: 0, timeout: '5m', resendInterval: '30s', failurePolicy: 'Fail', delivery } as PrestartHook['spec'],
  };
}
const viaBroker = (namespace: string, name: string) =>
  ({ transport: 'broker', broker: { namespace, name, subscriber: { uri: 'http://h/' } } }) as const;

const rb = (namespace: string, name: string, ...subjects: BindingView['subjects']): BindingView => ({
  kind: 'RoleBinding',
  name,
  namespace,
  subjects,
});
const crb = (name: string, ...subjects: BindingView['subjects']): BindingView => ({ kind: 'ClusterRoleBinding', name, subjects });
const group = (name: string) => ({ kind: 'Group', name });
const user = (name: string) => ({ kind: 'User', name });
const sa = (name: string, namespace?: string) => ({ kind: 'ServiceAccount', name, ...(namespace ? { namespace } : {}) });

test('brokersInUse: one entry per Broker with its hooks, broker transport only, in scope only', (t) => {
  const hooks = [
    hook('b', viaBroker('shop', 'default')),
    hook('a', viaBroker('shop', 'default')),
    hook('c', viaBroker('tools', 'bus')),
    hook('d', { transport: 'http', url: 'http://x/' }),
  ];
  t.deepEqual(brokersInUse(hooks), [
    {
      namespace: 'shop',
      name: 'default',
      hooks: [
        { name: 'a', uid: 'uid-a' },
        { name: 'b', uid: 'uid-b' },
      ],
    },
    { namespace: 'tools', name: 'bus', hooks: [{ name: 'c', uid: 'uid-c' }] },
  ]);
  t.deepEqual(
    brokersInUse(hooks, ['tools']).map((b) => b.namespace),
    ['tools'],
  );
});

test("candidateSubjects: the broad groups, other namespaces' ServiceAccounts and their groups; never the namespace's own", (t) => {
  const bindings = [
    rb(
      'shop',
      'edit-all',
      group('system:serviceaccounts'),
      group('system:authenticated'),
      group('tenant-devs'),
      user('alice'),
      sa('builder'), // the binding's own namespace
      sa('ci', 'tools'),
      group('system:serviceaccounts:shop'),
      group('system:serviceaccounts:tools'),
    ),
    rb('other', 'not-here', group('system:unauthenticated'), sa('x', 'elsewhere')),
    crb('gate', sa('knative-prestart-gate', 'knative-prestart')),
    crb('eventing', sa('eventing-controller', 'knative-eventing'), group('system:serviceaccounts:kube-system')),
    crb('ci-admin', sa('ci', 'tools'), user('system:serviceaccount:build:runner'), user('system:serviceaccount:shop:own')),
    crb('public', group('system:unauthenticated'), user('system:anonymous')),
  ];
  const found = candidateSubjects('shop', bindings, TRUSTED);
  t.deepEqual(
    found.map((c) => [c.key, c.namedIn]),
    [
      ['Group system:authenticated', ['RoleBinding shop/edit-all']],
      ['Group system:serviceaccounts', ['RoleBinding shop/edit-all']],
      ['Group system:serviceaccounts:tools', ['RoleBinding shop/edit-all']],
      ['Group system:unauthenticated', ['ClusterRoleBinding public']],
      ['ServiceAccount build/runner', ['ClusterRoleBinding ci-admin']],
      ['ServiceAccount tools/ci', ['ClusterRoleBinding ci-admin', 'RoleBinding shop/edit-all']],
      ['User system:anonymous', ['ClusterRoleBinding public']],
    ],
  );
});

test('candidateSubjects: what the SubjectAccessReview asks for each kind', (t) => {
  const found = candidateSubjects('shop', [rb('shop', 'x', group('system:authenticated'), sa('ci', 'tools'))], TRUSTED);
  t.deepEqual(
    found.map(({ user: u, groups }) => ({ user: u, groups })),
    [
      { user: GROUP_PROBE_USER, groups: ['system:authenticated'] },
      {
        user: 'system:serviceaccount:tools:ci',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:tools', 'system:authenticated'],
      },
    ],
  );
});

test('candidateSubjects: nothing to ask when only the namespace and the platform are named', (t) => {
  const bindings = [
    rb('shop', 'own', sa('app'), user('bob'), group('shop-admins')),
    crb('gate', sa('knative-prestart-gate', 'knative-prestart')),
  ];
  t.deepEqual(candidateSubjects('shop', bindings, TRUSTED), []);
});

const shop = { namespace: 'shop', name: 'default' };
const use = { ...shop, hooks: [{ name: 'db', uid: 'u1' }] };
const groupSA: Candidate = {
  kind: 'Group',
  key: 'Group system:serviceaccounts',
  user: GROUP_PROBE_USER,
  groups: ['system:serviceaccounts'],
  namedIn: ['RoleBinding shop/x'],
};
const tools: Candidate = {
  kind: 'ServiceAccount',
  key: 'ServiceAccount tools/ci',
  user: 'system:serviceaccount:tools:ci',
  groups: ['system:serviceaccounts', 'system:serviceaccounts:tools', 'system:authenticated'],
  namedIn: ['ClusterRoleBinding ci'],
};

test('groupsFirst, coveredByOpenGroup: a ServiceAccount allowed as a member of an open group is asked again by itself', (t) => {
  const anonymous: Candidate = {
    kind: 'User',
    key: 'User system:anonymous',
    user: 'system:anonymous',
    groups: ['system:unauthenticated'],
    namedIn: [],
  };
  const unauthenticated: Candidate = { ...groupSA, key: 'Group system:unauthenticated', groups: ['system:unauthenticated'] };
  t.deepEqual(
    groupsFirst([tools, anonymous, groupSA, unauthenticated]).map((c) => c.key),
    ['Group system:serviceaccounts', 'Group system:unauthenticated', 'ServiceAccount tools/ci', 'User system:anonymous'],
  );
  t.true(coveredByOpenGroup(tools, [groupSA]));
  t.false(coveredByOpenGroup(tools, [unauthenticated]));
  t.false(coveredByOpenGroup(tools, []));
  t.true(coveredByOpenGroup(anonymous, [unauthenticated]));
  t.false(coveredByOpenGroup(groupSA, [groupSA]), 'a group is never covered');
});

test('openMessage names the Broker, the subjects and where, the harm and the fix', (t) => {
  const text = openMessage(shop, [groupSA, tools]);
  t.is(
    text,
    'Broker shop/default is open: 2 subjects from outside the namespace may create Triggers in shop: ' +
      'Group system:serviceaccounts (named in RoleBinding shop/x); ServiceAccount tools/ci (named in ClusterRoleBinding ci). ' +
      'Such a Trigger receives every revision.prestart.requested this Broker carries with its correlation id, ' +
      'and whoever reads a request can answer it "succeeded" to the gate. ' +
      'Take Trigger create in shop away from them (in the binding named whose role grants it), or move the Broker to a namespace without tenant editors; ' +
      `or turn on sender identity and EventPolicies (docs/brokers.md §5). See docs/brokers.md, "Who must not edit the Broker's namespace".`,
  );
  t.true(text.length <= 1024);
  const many = Array.from({ length: 9 }, (_, i) => ({ ...tools, key: `ServiceAccount t${i}/ci` }));
  t.regex(openMessage(shop, many), /ServiceAccount t5\/ci \(named in ClusterRoleBinding ci\); and 3 more\./);
});

test('brokerReport: a Warning when the finding appears, none while it stays, another when it changes, a Normal when it goes', (t) => {
  const first = brokerReport([use], new Map([['shop', { open: [groupSA] }]]), new Map());
  t.deepEqual(first.gauges, [{ ...shop, value: 1 }]);
  t.deepEqual(
    first.events.map((e) => [e.hook.name, e.type, e.reason]),
    [['db', 'Warning', REASON_OPEN]],
  );
  t.is(first.events[0]?.message, openMessage(shop, [groupSA]));

  const same = brokerReport([use], new Map([['shop', { open: [groupSA] }]]), first.told);
  t.deepEqual(same.events, []);
  t.deepEqual(same.gauges, [{ ...shop, value: 1 }]);

  const changed = brokerReport([use], new Map([['shop', { open: [groupSA, tools] }]]), same.told);
  t.deepEqual(
    changed.events.map((e) => e.reason),
    [REASON_OPEN],
  );
  t.deepEqual(changed.gauges, [{ ...shop, value: 2 }]);

  const closed = brokerReport([use], new Map([['shop', { open: [] }]]), changed.told);
  t.deepEqual(
    closed.events.map((e) => [e.type, e.reason, e.message]),
    [['Normal', REASON_CLOSED, closedMessage(shop)]],
  );
  t.deepEqual(closed.gauges, [{ ...shop, value: 0 }]);
  t.deepEqual(brokerReport([use], new Map([['shop', { open: [] }]]), closed.told).events, []);
});

test('brokerReport: closed from the start tells nothing; a failed check is -1 and keeps what was told', (t) => {
  t.deepEqual(brokerReport([use], new Map([['shop', { open: [] }]]), new Map()).events, []);
  const open = brokerReport([use], new Map([['shop', { open: [groupSA] }]]), new Map());
  const failed = brokerReport([use], new Map([['shop', { error: 'HTTP 403: forbidden' }]]), open.told);
  t.deepEqual(failed.gauges, [{ ...shop, value: -1 }]);
  t.deepEqual(failed.events, []);
  t.is(failed.told.get(memoryKey(use.hooks[0] as { name: string; uid: string }, shop)), 'Group system:serviceaccounts');
  // Back and unchanged: no second Warning.
  t.deepEqual(brokerReport([use], new Map([['shop', { open: [groupSA] }]]), failed.told).events, []);
});

test('brokerReport: every hook of the Broker is told; a hook new to an open Broker is told at once', (t) => {
  const two = { ...shop, hooks: [...use.hooks, { name: 'scan', uid: 'u2' }] };
  const first = brokerReport([use], new Map([['shop', { open: [groupSA] }]]), new Map());
  const next = brokerReport([two], new Map([['shop', { open: [groupSA] }]]), first.told);
  t.deepEqual(
    next.events.map((e) => e.hook.name),
    ['scan'],
  );
});
