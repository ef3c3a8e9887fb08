import type { V1Job, V1Pod } from '@kubernetes/client-node';
import test from 'ava';
import { buildJob, jobName, labelValue } from '../../../../../hooks/builtin/job/manifest.ts';
import { type JobParams, readJobParams } from '../../../../../hooks/builtin/job/params.ts';
import { describePodFailure, failureMessage, jobState, lastFailedPod } from '../../../../../hooks/builtin/job/status.ts';

const params = (p: Record<string, unknown>): JobParams => {
  const read = readJobParams(p);
  if (Array.isArray(read)) throw new Error(read.join('; '));
  return read;
};

test('the Job name is <revision>-<hook>-<attempt>, a DNS label, and the same for the same request', (t) => {
  t.is(jobName('shop-00002', 'db-migrate', 1), 'shop-00002-db-migrate-1');
  t.is(jobName('shop-00002', 'corp.example.migrate', 3), 'shop-00002-corp-example-migrate-3');
  const long = jobName('a-very-long-service-name-for-the-orders-00012', 'platform.example.com-database-migration', 2);
  t.true(long.length <= 63, long);
  t.regex(long, /^a-very-long-service-name-for-the-orders-00012-plat.*-[0-9a-f]{8}-2$/);
  t.is(long, jobName('a-very-long-service-name-for-the-orders-00012', 'platform.example.com-database-migration', 2));
  t.not(long, jobName('a-very-long-service-name-for-the-orders-00012', 'platform.example.com-database-migration2', 2));
});

test('label values longer than 63 characters are shortened with a hash', (t) => {
  t.is(labelValue('db-migrate'), 'db-migrate');
  const v = labelValue(`${'x'.repeat(70)}.example`);
  t.true(v.length <= 63);
  t.regex(v, /^x+-[0-9a-f]{8}$/);
});

test('params: defaults, env as a map or a list, and every problem at once', (t) => {
  t.like(params({ image: 'migrate:v1' }), { image: 'migrate:v1', backoffLimit: 0, cleanup: 'OnSuccess', logLines: 20, env: [] });
  t.deepEqual(params({ useRevisionImage: true, env: { A: '1' } }).env, [{ name: 'A', value: '1' }]);
  const list = [{ name: 'DB', valueFrom: { secretKeyRef: { name: 'db', key: 'url' } } }];
  t.deepEqual(params({ useRevisionImage: true, env: list }).env, list);
  t.deepEqual(readJobParams({ cleanup: 'Sometimes', backoffLimit: -1, env: [{ value: 'x' }] }), [
    'params.image or params.useRevisionImage: true is required',
    'params.env must be a map of strings or a list of {name, value | valueFrom}',
    'params.backoffLimit must be a whole number ≥ 0, got -1',
    'params.cleanup must be one of Always, OnSuccess, Never, got "Sometimes"',
  ]);
  t.deepEqual(readJobParams({ image: 'x', useRevisionImage: true }), ['params.image and params.useRevisionImage: true exclude each other']);
});

test('the Job runs once, labelled, without an API token, with the Revision’s env when asked', (t) => {
  const job = buildJob({
    namespace: 'shop',
    revision: { name: 'shop-00002', uid: 'uid-1' },
    hook: 'db-migrate',
    attempt: 1,
    image: 'registry/shop@sha256:abc',
    params: params({ useRevisionImage: true, useRevisionEnv: true, command: ['migrate'], env: { STEP: 'up' }, podLabels: { team: 'a' } }),
    revisionContainer: {
      name: 'user-container',
      env: [{ name: 'DATABASE_URL', value: 'postgres://' }],
      envFrom: [{ secretRef: { name: 'app' } }],
    },
    activeDeadlineSeconds: 90,
  });
  t.is(job.metadata?.name, 'shop-00002-db-migrate-1');
  t.like(job.metadata?.labels, {
    'prestart.dev/revision': 'shop-00002',
    'prestart.dev/revision-uid': 'uid-1',
    'prestart.dev/hook': 'db-migrate',
    'prestart.dev/attempt': '1',
    team: 'a',
  });
  t.like(job.spec, { backoffLimit: 0, activeDeadlineSeconds: 90 });
  const pod = job.spec?.template.spec;
  t.is(pod?.restartPolicy, 'Never');
  t.false(pod?.automountServiceAccountToken);
  t.deepEqual(pod?.containers, [
    {
      name: 'prestart',
      image: 'registry/shop@sha256:abc',
      command: ['migrate'],
      env: [
        { name: 'DATABASE_URL', value: 'postgres://' },
        { name: 'STEP', value: 'up' },
      ],
      envFrom: [{ secretRef: { name: 'app' } }],
    },
  ]);
  const withAccount = buildJob({
    namespace: 'shop',
    revision: { name: 'r', uid: 'u' },
    hook: 'h',
    attempt: 2,
    image: 'i',
    params: params({ image: 'i', serviceAccountName: 'migrator' }),
    activeDeadlineSeconds: 5,
  });
  t.is(withAccount.spec?.template.spec?.serviceAccountName, 'migrator');
  t.is(withAccount.spec?.template.spec?.automountServiceAccountToken, undefined);
});

test('job state from its conditions', (t) => {
  const job = (conditions: Array<{ type: string; status: string; reason?: string; message?: string }>, active = 0): V1Job => ({
    status: { conditions, active },
  });
  t.deepEqual(jobState(job([], 1)), { state: 'running', active: 1, failed: 0 });
  t.deepEqual(
    jobState(
      job([
        { type: 'SuccessCriteriaMet', status: 'True' },
        { type: 'Complete', status: 'True' },
      ]),
    ),
    { state: 'complete' },
  );
  t.deepEqual(
    jobState(
      job([{ type: 'Failed', status: 'True', reason: 'DeadlineExceeded', message: 'Job was active longer than specified deadline' }]),
    ),
    {
      state: 'failed',
      reason: 'DeadlineExceeded',
      message: 'Job was active longer than specified deadline',
    },
  );
  t.deepEqual(jobState(job([{ type: 'FailureTarget', status: 'True' }], 1)), { state: 'running', active: 1, failed: 0 });
});

test('a failure names the Job, its reason, the pod’s exit and the end of its log', (t) => {
  const pods: V1Pod[] = [
    { metadata: { name: 'old', creationTimestamp: new Date(1000) }, status: { phase: 'Failed' } },
    {
      metadata: { name: 'new', creationTimestamp: new Date(2000) },
      status: {
        phase: 'Failed',
        containerStatuses: [
          {
            name: 'prestart',
            image: 'i',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { terminated: { exitCode: 3, reason: 'Error', message: 'boom' } },
          },
        ],
      },
    },
    { metadata: { name: 'ok', creationTimestamp: new Date(3000) }, status: { phase: 'Succeeded' } },
  ];
  const pod = lastFailedPod(pods);
  t.is(pod?.metadata?.name, 'new');
  t.is(describePodFailure(pod as V1Pod), 'container prestart exited with code 3 (Error: boom)');
  t.is(describePodFailure({ status: { phase: 'Failed', reason: 'Evicted', message: 'low on memory' } }), 'Evicted: low on memory');

  const base = {
    namespace: 'shop',
    job: 'j-1',
    reason: 'BackoffLimitExceeded',
    message: 'Job has reached the specified backoff limit',
    pod: { name: 'new', failure: 'container prestart exited with code 3 (Error: boom)' },
  };
  t.is(
    failureMessage({ ...base, logs: { lines: 'step 1\nstep 2: failed\n', count: 2 } }),
    'Job shop/j-1 failed: BackoffLimitExceeded (Job has reached the specified backoff limit); pod new: container prestart exited with code 3 (Error: boom); last 2 log lines:\nstep 1\nstep 2: failed',
  );
  t.regex(
    failureMessage({ ...base, logs: { unavailable: 'dial tcp: connection refused' } }),
    /; no logs available \(dial tcp: connection refused\)$/,
  );
  t.regex(failureMessage({ ...base, logs: { lines: '', count: 0 } }), /; the pod logged nothing$/);
  const long = failureMessage({ ...base, logs: { lines: `${'x'.repeat(5000)}\nthe error`, count: 2 } });
  t.true(long.length < 4096);
  t.regex(long, /…x+\nthe error$/);
});
