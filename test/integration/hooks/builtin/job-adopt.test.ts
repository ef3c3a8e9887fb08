// The job hook and a Job it finds under its Job's name, on the real control plane. The name
// (<revision>-<hook>-<attempt>) and labels are predictable and a namespace editor can move the
// attempt (prestart.dev/retry), so a tenant can make the next attempt's Job first: the same name
// and labels, a pod that does nothing and succeeds. The hook must not take that Job's success for
// the migration's; a Job that the hook itself made (a redelivery after a restart) it still adopts.

import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { BatchV1Api, KubeConfig, RbacAuthorizationV1Api, type V1Job } from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import pino from 'pino';
import { serveBuiltin } from '../../../../hooks/builtin/common/serve.ts';
import { buildJob, createJobHandler, type JobParams, jobName, readJobParams } from '../../../../hooks/builtin/index.ts';
import type { HookServer } from '../../../../hooks/sdk/http.ts';
import { fail, type HookHandler } from '../../../../hooks/sdk/types.ts';
import { addHook, builtinEnv, hookIdentity, hookStatusOf } from './_support.ts';

const TENANT = 'tenant-eve';
const PARAMS = { image: 'dev.local/migrate:v1', command: ['/app/migrate'], args: ['up'], env: { STEP: 'up' }, cleanup: 'Never' };

let env: GateEnv;
let admin: BatchV1Api;
let tenant: KubeConfig;

test.before(async () => {
  env = await builtinEnv('job-adopt');
  admin = env.admin.makeApiClient(BatchV1Api);
  // A namespace editor: Kubernetes' `edit` (Jobs, pods, and, aggregated from config/300-rbac.yaml, the retry annotation).
  await env.admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: env.namespace,
    body: {
      metadata: { name: `${TENANT}-edit` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
    },
  });
  tenant = new KubeConfig();
  tenant.loadFromFile(await env.cluster.mintUserKubeconfig(TENANT, ['system:authenticated']));
});

test.after.always(async () => {
  await env?.stop();
});

/**
 * The job hook as served, except that its first attempt fails at once, as when the database was
 * down: the run fails, and the next attempt (and so its Job's name) is known before it starts.
 */
async function serveHookFailingFirst(t: ExecutionContext): Promise<HookServer> {
  const { kubeConfig } = await hookIdentity(env, 'job');
  const logger = pino({ name: 'hook-job', level: process.env.HOOK_LOG_LEVEL ?? 'silent' });
  const real = createJobHandler({ kubeConfig, pollMaxMs: 500, logger });
  const handler: HookHandler = (req, ctx) => (req.attempt === 1 ? Promise.resolve(fail('the database was down')) : real(req, ctx));
  const server = await serveBuiltin('job', handler, { kubeConfig, host: '127.0.0.1', port: 0, sink: '', pollMaxMs: 500, logger });
  t.teardown(() => server.close());
  return server;
}

function params(): JobParams {
  const read = readJobParams(PARAMS);
  if (Array.isArray(read)) throw new Error(read.join('; '));
  return read;
}

/**
 * A Revision whose hook's first attempt failed, and the manifest of its second attempt's Job
 * exactly as the hook will build it (all but activeDeadlineSeconds, which it takes from the time left).
 */
async function afterAFailedAttempt(t: ExecutionContext, revision: string): Promise<{ hook: string; job: V1Job; name: string }> {
  const server = await serveHookFailingFirst(t);
  const { hook, annotations } = await addHook(env, revision, server.url, { params: PARAMS });
  const created = await env.createRevision(revision, { annotations });
  await env.waitForRun(revision, 'attempt 1 failed', (r) => hookStatusOf(r, hook)?.phase === 'Failed');
  const job = buildJob({
    namespace: env.namespace,
    revision: { name: revision, uid: created.metadata?.uid ?? '' },
    hook,
    attempt: 2,
    image: PARAMS.image,
    params: params(),
    activeDeadlineSeconds: 3600,
  });
  return { hook, job, name: jobName(revision, hook, 2) };
}

const attempt2 = (hook: string) => (r: Parameters<typeof hookStatusOf>[0]) => {
  const s = hookStatusOf(r, hook);
  return s?.attempt === 2 && (s.phase === 'Failed' || s.phase === 'Succeeded');
};

const forged = test.macro(async (t, revision: string, change: (job: V1Job) => void, differs: string) => {
  const { hook, job, name } = await afterAFailedAttempt(t, revision);
  change(job);
  const jobs = tenant.makeApiClient(BatchV1Api);
  const made = await jobs.createNamespacedJob({ namespace: env.namespace, body: job });
  // It would have answered for the hook: it runs to success on its own.
  await waitFor(async () => ((await admin.readNamespacedJob({ name, namespace: env.namespace })).status?.succeeded ?? 0) > 0, {
    what: `the tenant's Job ${name} to succeed`,
  });

  await env.annotateRun(revision, { 'prestart.dev/retry': 'after-the-fix' }, tenant);
  const run = await env.waitForRun(revision, 'attempt 2 answered', attempt2(hook));
  t.is(hookStatusOf(run, hook)?.phase, 'Failed');
  t.is(
    hookStatusOf(run, hook)?.message,
    `Job ${env.namespace}/${name} exists but is not the Job this hook would create (${differs}): not adopted, and left as it is; ` +
      `delete it (kubectl delete job ${name} -n ${env.namespace}) and retry: ` +
      `kubectl annotate prestartrun ${revision} -n ${env.namespace} prestart.dev/retry=$(date +%s) --overwrite`,
  );
  t.true(isHeld(await env.getRevision(revision)), 'the Revision stays held');
  const after = await admin.readNamespacedJob({ name, namespace: env.namespace });
  t.is(after.metadata?.uid, made.metadata?.uid, 'the tenant’s Job is neither deleted nor replaced');
});

test(
  'a tenant’s Job made under the next attempt’s name and labels that runs `exit 0` is not adopted: the hook fails, saying why',
  forged,
  'forge-cmd-00001',
  (job) => {
    const c = job.spec?.template.spec?.containers[0];
    if (c) c.command = ['sh', '-c', 'exit 0'];
  },
  'containers[0].command differs',
);

test(
  'the same with the hook’s command and another image',
  forged,
  'forge-img-00001',
  (job) => {
    const c = job.spec?.template.spec?.containers[0];
    if (c) c.image = 'dev.local/does-nothing:v1';
  },
  'containers[0].image differs',
);

test(
  'the same with the hook’s command and one more env var',
  forged,
  'forge-env-00001',
  (job) => {
    job.spec?.template.spec?.containers[0]?.env?.push({ name: 'MIGRATE_DRY_RUN', value: '1' });
  },
  'containers[0].env differs',
);

test('control: the Job the hook itself made for the attempt (a delivery before a restart) is adopted and its success reported', async (t) => {
  const revision = 'own-00001';
  const { hook, job, name } = await afterAFailedAttempt(t, revision);
  // As the hook's identity, as its first delivery did before the hook restarted.
  const { kubeConfig } = await hookIdentity(env, 'job');
  const made = await kubeConfig.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: env.namespace, body: job });

  await env.annotateRun(revision, { 'prestart.dev/retry': 'after-the-fix' }, tenant);
  const run = await env.waitForRun(revision, 'attempt 2 answered', attempt2(hook));
  t.is(hookStatusOf(run, hook)?.phase, 'Succeeded', hookStatusOf(run, hook)?.message);
  t.is(hookStatusOf(run, hook)?.message, `Job ${env.namespace}/${name} completed`);
  await env.waitReleased(revision);
  const after = await admin.readNamespacedJob({ name, namespace: env.namespace });
  t.is(after.metadata?.uid, made.metadata?.uid, 'adopted, not made again');
});
