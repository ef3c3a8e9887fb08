// Issue 20, item 4: the gate reports a Broker whose namespace lets outsiders create Triggers
// (and so read every request the Broker carries), against the real apiserver's RBAC authorizer.
// A gate of its own, as its real ServiceAccount (config/300-rbac.yaml); a PrestartHook delivering
// through a Broker in the gate's test namespace (the Broker itself need not exist: what is judged
// is who may create Triggers there). Each test grants or revokes, then changes the hook (a hook
// change is one of the check's triggers) and waits for the Event on the hook and the gauge on the
// gate's /metrics. Tests run in order, each from the state the previous one left.
import { randomBytes } from 'node:crypto';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AuthorizationV1Api, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import { HOOKS } from '../../../api/resources.ts';
import { REASON_CLOSED, REASON_OPEN } from '../../../gate/core/broker-namespace.ts';

const suffix = randomBytes(3).toString('hex');
const otherNs = `broker-open-other-${suffix}`;
const aggregated = `broker-open-aggregated-${suffix}`;
const part = `broker-open-part-${suffix}`;
const BROKER = 'default';

let env: GateEnv;
let rbac: RbacAuthorizationV1Api;
let hookName: string;
let hookUid: string;

test.before(async () => {
  env = await gateEnv('broker-open');
  rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  await env.core.createNamespace({ body: { metadata: { name: otherNs } } });
  // An aggregated ClusterRole, filled by kube-controller-manager from a labelled part: the gate
  // must take the authorizer's word, not read rules.
  await rbac.createClusterRole({
    body: {
      metadata: { name: aggregated },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [`prestart.test/${suffix}`]: 'true' } }] },
    },
  });
  await rbac.createClusterRole({
    body: {
      metadata: { name: part, labels: { [`prestart.test/${suffix}`]: 'true' } },
      rules: [{ apiGroups: ['eventing.knative.dev'], resources: ['triggers'], verbs: ['get', 'list', 'create'] }],
    },
  });
  hookName = `${env.instance}-bus`;
  await env.createHook(hookName, {
    delivery: { transport: 'broker', broker: { name: BROKER, namespace: env.namespace, subscriber: { uri: 'http://127.0.0.1:9/' } } },
  });
  const hook = (await env.custom.getClusterCustomObject({ ...HOOKS, name: hookName })) as { metadata: { uid: string } };
  hookUid = hook.metadata.uid;
});

test.after.always(async () => {
  await env?.stop();
  if (!rbac) return;
  for (const name of [aggregated, part]) await rbac.deleteClusterRole({ name }).catch(() => undefined);
  await env.core.deleteNamespace({ name: otherNs }).catch(() => undefined);
  for (const name of await env.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.uid=${hookUid}` }).then(
    (l) => l.items.map((e) => e.metadata?.name ?? ''),
    () => [],
  ))
    await env.core.deleteNamespacedEvent({ namespace: 'default', name }).catch(() => undefined);
});

/** The gauge for the test's Broker as the gate's /metrics shows it; undefined when absent. */
async function gauge(): Promise<number | undefined> {
  const text = await (await fetch(new URL('/metrics', env.gate.sinkUrl))).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`prestart_gate_broker_namespace_open{namespace="${env.namespace}",broker="${BROKER}"}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

async function waitForGauge(value: number): Promise<void> {
  await waitFor(async () => (await gauge()) === value, { timeoutMs: 30_000, what: `prestart_gate_broker_namespace_open = ${value}` });
}

/**
 * Waits until the apiserver's authorizer has caught up with a binding (and the aggregation
 * controller with the aggregated role), so the check the test then asks for sees it.
 */
async function waitForAuthorizer(user: string, groups: string[], allowed: boolean): Promise<void> {
  const authz = env.admin.makeApiClient(AuthorizationV1Api);
  await waitFor(
    async () => {
      const review = await authz.createSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user,
            groups,
            resourceAttributes: { verb: 'create', group: 'eventing.knative.dev', resource: 'triggers', namespace: env.namespace },
          },
        },
      });
      return Boolean(review.status?.allowed) === allowed;
    },
    { what: `the authorizer to ${allowed ? 'allow' : 'refuse'} ${user} Trigger create in ${env.namespace}` },
  );
}

/** A hook change: the gate checks again shortly (it does not watch bindings). */
async function touchHook(): Promise<void> {
  await env.custom.patchClusterCustomObject(
    { ...HOOKS, name: hookName, body: { metadata: { annotations: { 'prestart.test/touched': `${Date.now()}` } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** The hook's Events with `reason` whose message passes `ok`. */
async function waitForEvent(reason: string, ok: (message: string) => boolean, what: string): Promise<string> {
  return waitFor(
    async () => {
      const events = await env.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.uid=${hookUid}` });
      return events.items.find((e) => e.reason === reason && e.involvedObject.kind === 'PrestartHook' && ok(e.message ?? ''))?.message;
    },
    { timeoutMs: 30_000, what },
  );
}

async function bind(name: string, roleRef: { kind: 'ClusterRole' | 'Role'; name: string }, subjects: object[]): Promise<void> {
  await rbac.createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name, namespace: env.namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', ...roleRef },
      subjects: subjects as never,
    },
  });
}

test.serial('a Broker namespace nobody outside can write to reports 0 and no Event', async (t) => {
  await waitForGauge(0);
  const events = await env.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.uid=${hookUid}` });
  t.deepEqual(
    events.items.map((e) => e.reason),
    [],
  );
});

test.serial('Trigger create granted to system:serviceaccounts: a Warning on the hook and the gauge at 1', async (t) => {
  // The namespace's own ServiceAccount, bound beside the group, is not reported.
  await bind('all-service-accounts', { kind: 'ClusterRole', name: aggregated }, [
    { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'system:serviceaccounts' },
    { kind: 'ServiceAccount', name: 'app', namespace: env.namespace },
  ]);
  await waitForAuthorizer('probe', ['system:serviceaccounts'], true);
  await touchHook();
  await waitForGauge(1);
  const message = await waitForEvent(
    REASON_OPEN,
    (m) => /Group system:serviceaccounts \(named in [^)]*\bRoleBinding [^/]+\/all-service-accounts\)/.test(m),
    'the BrokerNamespaceOpen Event naming system:serviceaccounts',
  );
  t.true(message.startsWith(`Broker ${env.namespace}/${BROKER} is open: 1 subject from outside the namespace may create Triggers`));
  t.regex(message, /Take Trigger create in \S+ away from them/);
  t.false(message.includes(`ServiceAccount ${env.namespace}/app`));
});

test.serial('Trigger create granted (wildcard Role) to a ServiceAccount of another namespace: a new Warning naming it', async (t) => {
  await rbac.deleteNamespacedRoleBinding({ namespace: env.namespace, name: 'all-service-accounts' });
  await rbac.createNamespacedRole({
    namespace: env.namespace,
    body: {
      metadata: { name: 'eventing-anything', namespace: env.namespace },
      rules: [{ apiGroups: ['eventing.knative.dev'], resources: ['*'], verbs: ['*'] }],
    },
  });
  await bind('ci', { kind: 'Role', name: 'eventing-anything' }, [{ kind: 'ServiceAccount', name: 'ci', namespace: otherNs }]);
  await waitForAuthorizer('probe', ['system:serviceaccounts'], false);
  await waitForAuthorizer(`system:serviceaccount:${otherNs}:ci`, [], true);
  await touchHook();
  const message = await waitForEvent(
    REASON_OPEN,
    (m) => m.includes(`ServiceAccount ${otherNs}/ci (named in RoleBinding ${env.namespace}/ci)`),
    `the BrokerNamespaceOpen Event naming ServiceAccount ${otherNs}/ci`,
  );
  t.false(message.includes('Group system:serviceaccounts'));
  t.is(await gauge(), 1);
});

test.serial('the binding removed: the gauge back to 0 and a Normal Event says so', async (t) => {
  await rbac.deleteNamespacedRoleBinding({ namespace: env.namespace, name: 'ci' });
  await waitForAuthorizer(`system:serviceaccount:${otherNs}:ci`, [], false);
  await touchHook();
  await waitForGauge(0);
  const message = await waitForEvent(REASON_CLOSED, () => true, 'the BrokerNamespaceClosed Event');
  t.is(
    message,
    `Broker ${env.namespace}/${BROKER} is no longer open: no subject from outside namespace ${env.namespace} may create Triggers there.`,
  );
});
