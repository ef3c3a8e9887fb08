// A completed Job counts only when its pods ran the template's containers, and the digest the
// template names: a pod re-imaged in place, or one of a tenant's adopted by the Job controller,
// makes the hook fail.
import type { V1Pod, V1PodTemplateSpec } from '@kubernetes/client-node';
import test from 'ava';
import { untrustedRun } from '../../../../../hooks/builtin/job/ran.ts';

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const IMAGE = `registry.example/shop@${DIGEST}`;
const job = { namespace: 'shop', name: 'shop-00002-db-migrate-1' };
const template = (image = IMAGE): V1PodTemplateSpec => ({
  spec: { restartPolicy: 'Never', containers: [{ name: 'prestart', image, command: ['/app/migrate'], args: ['up'] }] },
});

const pod = (
  name: string,
  { phase = 'Succeeded', image = IMAGE, command = ['/app/migrate'], imageID = `registry.example/shop@${DIGEST}` } = {},
): V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: 'prestart', image, command, args: ['up'] }] },
  status: { phase, containerStatuses: [{ name: 'prestart', image, imageID, ready: false, restartCount: 0 }] },
});

test('pods that ran the template’s container and digest are trusted', (t) => {
  t.is(untrustedRun(job, template(), [pod('p-1')]), undefined);
  t.is(untrustedRun(job, template(), [pod('p-1', { phase: 'Failed' }), pod('p-2')]), undefined, 'a retried pod, then a success');
  t.is(untrustedRun(job, template(), [pod('p-1', { imageID: `docker-pullable://registry.example/shop@${DIGEST}` })]), undefined);
  t.is(
    untrustedRun(job, template('dev.local/migrate:v1'), [pod('p-1', { image: 'dev.local/migrate:v1', imageID: 'sha256:0f' })]),
    undefined,
    'no digest to compare',
  );
});

test('a pod that ran another digest makes the hook fail, naming the pod and both digests', (t) => {
  const other = `registry.example/shop@sha256:${'cd'.repeat(32)}`;
  t.is(
    untrustedRun(job, template(), [pod('p-1', { imageID: other })]),
    `Job shop/shop-00002-db-migrate-1 completed, but its pod p-1 ran ${other} for container "prestart", not the digest its template names (${DIGEST}): not trusted`,
  );
  t.regex(
    untrustedRun(job, template(), [pod('p-1', { imageID: 'sha256:0f0f' })]) ?? '',
    /ran sha256:0f0f .* not trusted$/,
    'a config id is not the digest',
  );
});

test('a pod re-imaged in place, or a tenant’s pod adopted by the Job with another command, makes the hook fail', (t) => {
  t.regex(
    untrustedRun(job, template(), [pod('p-1', { image: 'busybox' })]) ?? '',
    /its pod p-1 does not run the Job's template \(container "prestart": image changed\)/,
  );
  t.regex(
    untrustedRun(job, template(), [pod('p-1'), pod('mine', { command: ['sh', '-c', 'exit 0'] })]) ?? '',
    /its pod mine does not run the Job's template \(container "prestart": command changed\)/,
  );
  const noContainer: V1Pod = {
    metadata: { name: 'p-1' },
    spec: { containers: [{ name: 'other', image: IMAGE }] },
    status: { phase: 'Succeeded' },
  };
  t.regex(untrustedRun(job, template(), [noContainer]) ?? '', /has no container "prestart"/);
});

test('without a pod that succeeded (deleted), the completion is not trusted: fail closed', (t) => {
  t.is(
    untrustedRun(job, template(), []),
    'Job shop/shop-00002-db-migrate-1 completed, but no pod of it that succeeded is left to show what ran (deleted?): not trusted; retry the hook to run it again',
  );
  t.regex(untrustedRun(job, template(), [pod('p-1', { phase: 'Failed' })]) ?? '', /no pod of it that succeeded/);
});

test('a status without imageID (a fake node) passes; a succeeded pod without the container’s status does not', (t) => {
  t.is(untrustedRun(job, template(), [pod('p-1', { imageID: '' })]), undefined);
  const bare = pod('p-1');
  if (bare.status) bare.status.containerStatuses = [];
  t.regex(untrustedRun(job, template(), [bare]) ?? '', /reports no status for container "prestart"/);
});
