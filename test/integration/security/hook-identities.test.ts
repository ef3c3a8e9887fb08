// The built-in hooks' identities, attacked (issue 10, M2): a hook pod is network-facing, so take
// its ServiceAccount as stolen. The secret hook's identity tries to read the key that signs every
// release and the webhook CA; the job hook's tries to run a Job as the gate in the gate's
// namespace, and in kube-system. RBAC (config/600-builtin-hooks.yaml: namespace rights bound per
// namespace, never in knative-prestart) refuses each; nothing is created. And a hook asked to
// serve a namespace it is not bound in fails the request saying how an admin binds it.

import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { BatchV1Api, CoreV1Api, type V1Job } from '@kubernetes/client-node';
import test from 'ava';
import { statusOf } from '../../../api/kube-errors.ts';
import { CORRELATION_SECRET } from '../../../gate/delivery/correlation-keys.ts';
import { certSecretName } from '../../../gate/webhooks/tls.ts';
import { addHook, builtinEnv, hookIdentity, hookStatusOf, serveBuiltinHook } from '../hooks/builtin/_support.ts';

let env: GateEnv;

test.before(async () => {
  // Installs the hooks' RBAC, but binds neither hook in this namespace.
  env = await builtinEnv('hookids', { bindHooks: false });
});

test.after.always(async () => {
  await env?.stop();
});

/** The HTTP status the apiserver answered, 200 when it accepted. */
const statusOfCall = (call: Promise<unknown>): Promise<number | undefined> =>
  call.then(
    () => 200,
    (err: unknown) => statusOf(err),
  );

test('the secret hook’s identity cannot read the reply-signing key or the webhook CA', async (t) => {
  const core = (await hookIdentity(env, 'secret')).kubeConfig.makeApiClient(CoreV1Api);
  // This env's gate made both at its start.
  for (const name of [CORRELATION_SECRET, certSecretName(env.instance)]) {
    await t.notThrowsAsync(env.core.readNamespacedSecret({ name, namespace: 'knative-prestart' }), `${name} exists`);
    t.is(await statusOfCall(core.readNamespacedSecret({ name, namespace: 'knative-prestart' })), 403, name);
  }
  t.is(await statusOfCall(core.listNamespacedSecret({ namespace: 'knative-prestart' })), 403, 'nor list them');
});

test('the job hook’s identity cannot run a Job as the gate, nor in kube-system', async (t) => {
  const batch = (await hookIdentity(env, 'job')).kubeConfig.makeApiClient(BatchV1Api);
  const job = (namespace: string, serviceAccountName: string): V1Job => ({
    metadata: { name: 'become-the-gate', namespace },
    spec: {
      template: {
        spec: { restartPolicy: 'Never', serviceAccountName, containers: [{ name: 'x', image: 'dev.local/attacker:v1' }] },
      },
    },
  });
  t.is(
    await statusOfCall(
      batch.createNamespacedJob({ namespace: 'knative-prestart', body: job('knative-prestart', 'knative-prestart-gate') }),
    ),
    403,
  );
  t.is(
    await statusOfCall(batch.createNamespacedJob({ namespace: 'kube-system', body: job('kube-system', 'generic-garbage-collector') })),
    403,
  );
  for (const namespace of ['knative-prestart', 'kube-system']) {
    t.is(
      await statusOfCall(env.admin.makeApiClient(BatchV1Api).readNamespacedJob({ name: 'become-the-gate', namespace })),
      404,
      `nothing in ${namespace}`,
    );
  }
});

test('a hook not bound in the Revision’s namespace fails the request with the command that binds it', async (t) => {
  const secretHook = await serveBuiltinHook(t, env, 'secret');
  const secret = await addHook(env, 'unbound-secret', secretHook.url, { params: { secretName: 'db', as: 'volume' }, allowed: ['volume'] });
  await env.createRevision('unbound-00001', { annotations: secret.annotations });
  const run = await env.waitForRun('unbound-00001', 'the secret hook failed', (r) => hookStatusOf(r, secret.hook)?.phase === 'Failed');
  t.regex(
    hookStatusOf(run, secret.hook)?.message ?? '',
    new RegExp(
      `^cannot read Secret ${env.namespace}/db: .*forbidden.*\\(the hook's identity is not bound in ${env.namespace}; an admin grants it with: ` +
        `kubectl create rolebinding prestart-hook-secret -n ${env.namespace} --clusterrole=knative-prestart-hook-secret-namespace ` +
        '--serviceaccount=knative-prestart:prestart-hook-secret \\(config/600-builtin-hooks.yaml\\)\\)$',
    ),
  );
  t.true(isHeld(await env.getRevision('unbound-00001')));

  const jobHook = await serveBuiltinHook(t, env, 'job');
  const job = await addHook(env, 'unbound-job', jobHook.url, { params: { image: 'dev.local/migrate:v1' } });
  await env.createRevision('unbound-00002', { annotations: job.annotations });
  const jobRun = await env.waitForRun('unbound-00002', 'the job hook failed', (r) => hookStatusOf(r, job.hook)?.phase === 'Failed');
  t.regex(
    hookStatusOf(jobRun, job.hook)?.message ?? '',
    new RegExp(
      `^could not create Job ${env.namespace}/\\S+: .*forbidden.* \\(the hook's identity is not bound in ${env.namespace}; an admin grants it with: ` +
        `kubectl create rolebinding prestart-hook-job -n ${env.namespace} --clusterrole=knative-prestart-hook-job-namespace`,
    ),
  );
  t.true(isHeld(await env.getRevision('unbound-00002')));
});
