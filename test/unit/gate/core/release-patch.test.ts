// The release patch (gate/core/release-patch.ts): what it removes and what it tests first.
import test from 'ava';
import { CANCEL_FINALIZER, type ContainerImage } from '../../../../api/types.ts';
import { releaseOps } from '../../../../gate/core/release-patch.ts';
import { heldRevision } from './_builders.ts';

const DIGEST_A = `registry.example/app@sha256:${'a'.repeat(64)}`;
const DIGEST_B = `registry.example/app@sha256:${'b'.repeat(64)}`;

test('the release patch tests exactly what it removes: the hold label and the gate finalizer at its index', (t) => {
  const revision = {
    ...heldRevision(['db']),
    finalizers: ['someone.else/keep', CANCEL_FINALIZER],
  };
  t.deepEqual(releaseOps(revision, true), [
    { op: 'test', path: '/metadata/labels/prestart.dev~1hold', value: 'true' },
    { op: 'remove', path: '/metadata/labels/prestart.dev~1hold' },
    { op: 'add', path: '/metadata/labels/prestart.dev~1inject', value: 'true' },
    { op: 'add', path: '/metadata/annotations/prestart.dev~1reason', value: '' },
    { op: 'remove', path: '/metadata/annotations/prestart.dev~1reason' },
    { op: 'test', path: '/metadata/finalizers/1', value: CANCEL_FINALIZER },
    { op: 'remove', path: '/metadata/finalizers/1' },
  ]);
});

test('the release patch tests Knative’s status digests, position by position, before it changes anything', (t) => {
  const containers: ContainerImage[] = [
    { name: 'user-container', image: 'registry.example/app:v1', digest: DIGEST_A },
    { name: 'sidecar', image: 'dev.local/sidecar:v1' },
    { name: 'migrate', image: 'registry.example/migrate:v1', digest: DIGEST_B, init: true },
  ];
  const ops = releaseOps(heldRevision(['scan']), false, containers);
  t.deepEqual(ops.slice(0, 3), [
    { op: 'test', path: '/status/containerStatuses', value: [{ name: 'user-container', imageDigest: DIGEST_A }, { name: 'sidecar' }] },
    { op: 'test', path: '/status/initContainerStatuses', value: [{ name: 'migrate', imageDigest: DIGEST_B }] },
    { op: 'test', path: '/metadata/labels/prestart.dev~1hold', value: 'true' },
  ]);
  t.false(
    releaseOps(heldRevision(['scan']), false).some((op) => op.path.startsWith('/status')),
    'no containers (break glass, an earlier run): no status test',
  );
});
