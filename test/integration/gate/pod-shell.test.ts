// The gate tells who may open a shell (`kubectl exec`/`attach`) in the pods of a namespace whose
// Revisions hooks hold: no admission policy sees those CONNECT requests, so a tenant allowed them
// runs, in a released Revision's pod, what no hook was asked about. Against the real apiserver's
// RBAC authorizer and Kubernetes' own `edit` and `view` roles, with a gate of its own as its real
// ServiceAccount (config/300-rbac.yaml). The check runs when a term starts, when a namespace gets
// its first PrestartRun and every 5 minutes; the tests use the first two.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AuthorizationV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { REASON_SHELL_OPEN } from '../../../gate/core/pod-shell.ts';

let env: GateEnv;
let rbac: RbacAuthorizationV1Api;

test.before(async () => {
  env = await gateEnv('pod-shell');
  rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
});

test.after.always(async () => {
  await env?.stop();
});

const bind = (name: string, role: string, user: string) =>
  rbac.createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
  });

/** Until the authorizer's RBAC cache has the bindings just written (the check reads it, not them). */
const authorizerSays = (user: string, allowed: boolean) =>
  waitFor(
    async () => {
      const review = await env.admin.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
        body: { spec: { user, resourceAttributes: { resource: 'pods', subresource: 'exec', verb: 'create', namespace: env.namespace } } },
      });
      return (review.status?.allowed === true) === allowed;
    },
    { timeoutMs: 30_000, what: `the authorizer to ${allowed ? 'allow' : 'refuse'} ${user} exec` },
  );

/** The gate's gauge for this namespace, or undefined while it has none. */
async function gauge(): Promise<number | undefined> {
  const text = await env.gate.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`prestart_gate_namespace_pod_shell_open{namespace="${env.namespace}"}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

const shellEvents = async () =>
  (
    await env.core.listNamespacedEvent({
      namespace: env.namespace,
      fieldSelector: `involvedObject.kind=Namespace,reason=${REASON_SHELL_OPEN}`,
    })
  ).items;

test.serial(
  'a hooked namespace whose editor may exec: a Warning in the namespace names them, the gauge counts them; a viewer is not named',
  async (t) => {
    await bind('alice-edit', 'edit', 'alice');
    await bind('bob-view', 'view', 'bob');
    await authorizerSays('alice', true);
    const hook = await startHookServer(async () => ({ status: 202 }));
    t.teardown(() => hook.close());
    const hookName = `${env.instance}-shell`;
    await env.createHook(hookName, { match: env.annotationMatch('shell', 'yes'), delivery: { transport: 'http', url: hook.url } });
    await env.waitUntilStamped(hookName, { shell: 'yes' });
    t.is(await gauge(), undefined, 'no run, no hooked namespace');
    await env.createRevision('shell-00001', { annotations: { shell: 'yes' } });

    const [event] = await waitFor(async () => ((await shellEvents()).length > 0 ? shellEvents() : undefined), {
      timeoutMs: 30_000,
      what: `a ${REASON_SHELL_OPEN} Event in ${env.namespace}`,
    });
    t.is(event?.type, 'Warning');
    t.is(event?.involvedObject.name, env.namespace);
    t.regex(
      event?.message ?? '',
      new RegExp(
        `^Namespace ${env.namespace} has Revisions under pre-start hooks, and 1 subject may exec or attach into its pods: User alice \\(named in RoleBinding ${env.namespace}/alice-edit\\)\\.`,
      ),
    );
    t.notRegex(event?.message ?? '', /bob/);
    await waitFor(async () => (await gauge()) === 1, { timeoutMs: 30_000, what: 'the gauge to count 1' });
  },
);

test.serial('the editor’s binding gone: the next term’s check counts 0', async (t) => {
  await rbac.deleteNamespacedRoleBinding({ name: 'alice-edit', namespace: env.namespace });
  await authorizerSays('alice', false);
  await env.gate.stop();
  await env.startGate();
  await waitFor(async () => (await gauge()) === 0, { timeoutMs: 30_000, what: 'the gauge to count 0' });
  t.is(await gauge(), 0, 'bob (view) may not exec');
});
