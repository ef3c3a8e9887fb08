// The job hook on the real control plane: a Job per Revision, run by the Job controller on a
// kwok node (Job pods succeed; a pod labelled prestart.dev/test-fail=true fails, by the Stage in
// devcluster/kwok-test-stages.yaml), reported back through the real gate.

import type { GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { BatchV1Api, type V1Job } from '@kubernetes/client-node';
import test from 'ava';
import { statusOf } from '../../../../api/kube-errors.ts';
import { jobName } from '../../../../hooks/builtin/index.ts';
import { addHook, builtinEnv, hookStatusOf, serveBuiltinHook } from './_support.ts';

let env: GateEnv;
let batch: BatchV1Api;

test.before(async () => {
  env = await builtinEnv('job');
  batch = env.admin.makeApiClient(BatchV1Api);
});

test.after.always(async () => {
  await env?.stop();
});

const readJob = (name: string): Promise<V1Job> => batch.readNamespacedJob({ name, namespace: env.namespace });

test('a Job running the Revision’s own image succeeds and the Revision is released', async (t) => {
  const server = await serveBuiltinHook(t, env, 'job');
  const { hook, annotations } = await addHook(env, 'migrate', server.url, {
    params: { useRevisionImage: true, command: ['/app/migrate'], args: ['up'], env: { STEP: 'up' }, cleanup: 'Never' },
  });
  await env.createRevision('orders-00001', { annotations });

  await env.waitReleased('orders-00001');
  const run = await env.waitForRun('orders-00001', 'Released', (r) => r.status?.phase === 'Released');
  const name = jobName('orders-00001', hook, 1);
  t.is(hookStatusOf(run, hook)?.message, `Job ${env.namespace}/${name} completed`);

  const job = await readJob(name);
  t.is(job.status?.succeeded, 1);
  t.like(job.metadata?.labels, { 'prestart.dev/revision': 'orders-00001', 'prestart.dev/hook': hook, 'prestart.dev/attempt': '1' });
  const container = job.spec?.template.spec?.containers[0];
  // dev.local is a registry Knative does not resolve: the request names the image as written, and the Job runs that.
  t.is(container?.image, 'dev.local/demo/app:v1', 'the image of the Revision, as the request named it');
  t.deepEqual(container?.command, ['/app/migrate']);
  t.deepEqual(container?.args, ['up']);
  t.deepEqual(
    container?.env?.map((e) => ({ name: e.name, value: e.value })),
    [{ name: 'STEP', value: 'up' }],
  );
  t.false(job.spec?.template.spec?.automountServiceAccountToken, 'no API token unless params.serviceAccountName');
});

test('with a digest resolved, the Job runs the digest the request named and the run recorded', async (t) => {
  const server = await serveBuiltinHook(t, env, 'job');
  const { hook, annotations } = await addHook(env, 'pinned', server.url, { params: { useRevisionImage: true, cleanup: 'Never' } });
  const digest = `registry.example/demo/app@sha256:${'5e'.repeat(32)}`;
  // As Knative's reconciler writes it once it resolved the tag: the gate asks no hook before.
  await env.createRevision('pinned-00001', { annotations, containerStatuses: [{ name: 'user-container', imageDigest: digest }] });

  const run = await env.waitForRun('pinned-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.spec.containers?.find((c) => c.name === 'user-container')?.digest, digest, 'what the gate recorded and sent');
  const job = await readJob(jobName('pinned-00001', hook, 1));
  t.is(job.spec?.template.spec?.containers[0]?.image, digest, 'the digest, not the tag of the spec');
});

test('a failing Job keeps the Revision held, with the Job’s reason and what its pod said', async (t) => {
  const server = await serveBuiltinHook(t, env, 'job');
  const { hook, annotations } = await addHook(env, 'failing', server.url, {
    params: {
      image: 'dev.local/migrate:v1',
      podLabels: { 'prestart.dev/test-fail': 'true' },
      podAnnotations: { 'prestart.dev/test-fail-message': 'relation "orders" already exists' },
    },
  });
  const revision = await env.createRevision('billing-00001', { annotations });

  const run = await env.waitForRun('billing-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  const name = jobName('billing-00001', hook, 1);
  const message = hookStatusOf(run, hook)?.message ?? '';
  t.is(hookStatusOf(run, hook)?.phase, 'Failed');
  t.regex(message, new RegExp(`^Job ${env.namespace}/${name} failed: BackoffLimitExceeded`));
  t.regex(message, /container prestart exited with code 1 \(Error: relation "orders" already exists\)/);
  // kwok plays the kubelet without containers: there is no log to read.
  t.regex(message, /no logs available/);
  // issue 12: the details link is the command that prints the Job's logs.
  t.is(hookStatusOf(run, hook)?.details, `kubectl logs job/${name} -n ${env.namespace} --all-containers`);

  t.true(isHeld(await env.getRevision('billing-00001')));
  const denied = await env.createDeploymentLikeKnative(revision);
  t.false(denied.created, 'Knative still cannot create its Deployment');
  t.is((await readJob(name)).status?.failed, 1, 'cleanup OnSuccess keeps a failed Job for kubectl logs');
});

test('cancelling the run (the Revision is deleted) deletes its Job', async (t) => {
  const server = await serveBuiltinHook(t, env, 'job');
  // A ServiceAccount that does not exist: the Job controller cannot create its pod, so it runs on.
  const { hook, annotations } = await addHook(env, 'stuck', server.url, {
    params: { image: 'dev.local/migrate:v1', serviceAccountName: 'does-not-exist' },
  });
  await env.createRevision('stuck-00001', { annotations });
  const name = jobName('stuck-00001', hook, 1);
  await waitFor(() => readJob(name), { what: `Job ${name} created` });

  await env.custom.deleteNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'revisions',
    namespace: env.namespace,
    name: 'stuck-00001',
  });
  const gone = await waitFor(
    async () => {
      try {
        await readJob(name);
        return false;
      } catch (err) {
        return statusOf(err) === 404;
      }
    },
    { what: `Job ${name} deleted after the cancel` },
  );
  t.true(gone);
});
