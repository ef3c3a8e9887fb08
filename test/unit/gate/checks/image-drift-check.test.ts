// Post-release image drift: the pods of a released hooked Revision against the digests its hooks
// approved (the run's spec.containers). The core finds and words the drift; the shell tells each
// finding once (an Event, a line in the run's status), keeps the gauge, and a new leader repeats
// nothing a run records; `kn prestart why` says it. The apiserver is played by fakes here;
// test/integration/gate/image-drift.test.ts does it against the real one.
import type { CoreV1Api } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import type { RunObject } from '../../../../api/resources.ts';
import type { ContainerImage, ImageDriftRecord } from '../../../../api/types.ts';
import { whyParagraph } from '../../../../cli/prestart/render.ts';
import { startImageDriftWatch } from '../../../../gate/checks/image-drift-check.ts';
import { digestOf, driftText, imageDrift, MAX_RECORDED_DRIFT, newDrift, type PodImages } from '../../../../gate/core/drift.ts';
import { type PodObject, podView, runView } from '../../../../gate/kube/cache-views.ts';
import type { KubeClient } from '../../../../gate/kube/kube-client.ts';
import { createMetrics } from '../../../../gate/telemetry/metrics.ts';

const A = `sha256:${'a'.repeat(64)}`;
const B = `sha256:${'b'.repeat(64)}`;
const C = `sha256:${'c'.repeat(64)}`;
const APPROVED: ContainerImage[] = [
  { name: 'user-container', image: 'registry.example/app:v1', digest: `registry.example/app@${A}` },
  { name: 'migrate', image: 'registry.example/migrate:v1', digest: `registry.example/migrate@${C}`, init: true },
];
const T0 = new Date('2026-12-05T10:00:00Z');

const pod = (name: string, containers: PodImages['containers']): PodImages => ({ name, containers });

test('digestOf: the digest at the end of every form a runtime reports, and of a resolved reference', (t) => {
  t.is(digestOf(`docker.io/x/y@${A}`), A);
  t.is(digestOf(A), A);
  t.is(digestOf(`docker-pullable://docker.io/x/y@${A}`), A);
  t.is(digestOf(`docker://${A}`), A);
  t.is(digestOf('registry.example/app:v1'), undefined, 'a tag names no digest');
  t.is(digestOf(undefined), undefined);
});

test('imageDrift: a container running another digest than the approved one is drift, in any imageID form', (t) => {
  const findings = imageDrift(APPROVED, [
    pod('web-1', [
      { name: 'user-container', imageID: `docker.io/x/y@${B}` },
      { name: 'migrate', imageID: `docker-pullable://registry.example/migrate@${C}` },
    ]),
    pod('web-2', [{ name: 'user-container', imageID: B }]),
  ]);
  t.deepEqual(findings, [
    { pod: 'web-1', container: 'user-container', expected: A, running: B },
    { pod: 'web-2', container: 'user-container', expected: A, running: B },
  ]);
  t.is(driftText(findings[0] as (typeof findings)[0]), `pod web-1 container user-container runs ${B} but hooks approved ${A}`);
});

test('imageDrift: not drift: the approved digest under another repository, queue-proxy, a container not started, an unresolved registry', (t) => {
  t.deepEqual(
    imageDrift(APPROVED, [
      pod('web-1', [
        { name: 'user-container', imageID: `mirror.example/app@${A}` },
        { name: 'queue-proxy', imageID: `gcr.io/knative/queue@${B}` },
        { name: 'migrate' },
      ]),
    ]),
    [],
  );
  // Knative does not resolve dev.local: the image runs as written, there is no digest to hold it to.
  t.deepEqual(
    imageDrift([{ name: 'user-container', image: 'dev.local/app:v1' }], [pod('p', [{ name: 'user-container', imageID: B }])]),
    [],
  );
  // An image written as a digest needs no resolution: it is what was approved.
  t.is(
    imageDrift([{ name: 'user-container', image: `r.example/app@${A}` }], [pod('p', [{ name: 'user-container', imageID: B }])]).length,
    1,
  );
});

test('imageDrift: an imageID in no known form is reported as it is', (t) => {
  t.deepEqual(imageDrift(APPROVED, [pod('p', [{ name: 'user-container', imageID: 'something-else' }])]), [
    { pod: 'p', container: 'user-container', expected: A, running: 'something-else' },
  ]);
});

test('newDrift: each (pod, container, running digest) once, whether told this term or recorded on the run; the record keeps the first', (t) => {
  const f = { pod: 'web-1', container: 'user-container', expected: A, running: B };
  const first = newDrift([f], new Set(), [], T0);
  t.deepEqual(first.fresh, [f]);
  t.deepEqual(first.record, [{ ...f, detectedAt: T0.toISOString() }]);
  t.deepEqual(newDrift([f], new Set(), first.record, T0).fresh, [], 'recorded by an earlier leader');
  // The same container moving on to a third digest is news.
  const again = newDrift([{ ...f, running: C }], new Set(), first.record, T0);
  t.is(again.fresh.length, 1);
  t.is(again.record.length, 2);
  const many: ImageDriftRecord[] = Array.from({ length: MAX_RECORDED_DRIFT }, (_, i) => ({ ...f, pod: `p${i}`, detectedAt: '' }));
  const full = newDrift([f], new Set(), many, T0);
  t.is(full.fresh.length, 1, 'still told');
  t.is(full.record.length, MAX_RECORDED_DRIFT, 'the record keeps the first ones');
});

test('podView keeps the Revision labels and each container’s imageID, nothing of the spec', (t) => {
  const view = podView({
    metadata: {
      name: 'web-1',
      namespace: 'team',
      resourceVersion: '7',
      labels: { 'serving.knative.dev/revision': 'web-00001', 'serving.knative.dev/revisionUID': 'u1', app: 'web' },
      managedFields: [{}],
    },
    spec: { containers: [{ name: 'user-container', image: 'x' }] },
    status: {
      phase: 'Running',
      containerStatuses: [{ name: 'user-container', imageID: `x@${A}`, image: 'x', ready: true }, { name: 'queue-proxy' }],
    },
  } as unknown as PodObject);
  t.deepEqual(view, {
    metadata: {
      name: 'web-1',
      namespace: 'team',
      resourceVersion: '7',
      labels: { 'serving.knative.dev/revision': 'web-00001', 'serving.knative.dev/revisionUID': 'u1' },
    },
    status: { containerStatuses: [{ name: 'user-container', imageID: `x@${A}` }, { name: 'queue-proxy' }] },
  });
});

const fullRun = (imageDrift?: ImageDriftRecord[]): RunObject => ({
  metadata: { name: 'web-00001', namespace: 'team', uid: 'run-1', resourceVersion: '3' },
  spec: { revisionUID: 'u1', hooks: [], containers: APPROVED },
  status: { phase: 'Released', hooks: [], conditions: [], releasedAt: T0.toISOString(), ...(imageDrift ? { imageDrift } : {}) },
});
/** As the informer caches it: slim, and still with its drift record. */
const releasedRun = (imageDrift?: ImageDriftRecord[]): RunObject => runView(fullRun(imageDrift));

const revisionPod = (name: string, imageID: string, uid = 'u1'): PodObject => ({
  metadata: { name, namespace: 'team', labels: { 'serving.knative.dev/revision': 'web-00001', 'serving.knative.dev/revisionUID': uid } },
  status: {
    containerStatuses: [
      { name: 'user-container', imageID },
      { name: 'queue-proxy', imageID: `q@${C}` },
    ],
  },
});

/** The watch with the apiserver played by fakes: what it would write, kept in order. */
function watchWith(pods: PodObject[], run: RunObject | undefined, inScope = true) {
  const events: Array<{ reason: string; message: string; involved: string }> = [];
  const written: ImageDriftRecord[][] = [];
  let current = run;
  const core = {
    createNamespacedEvent: async (req: {
      body: { reason: string; message: string; involvedObject: { kind: string; name: string; uid: string } };
    }) => {
      const o = req.body.involvedObject;
      events.push({ reason: req.body.reason, message: req.body.message, involved: `${o.kind}/${o.name}/${o.uid}` });
      return {};
    },
  } as unknown as CoreV1Api;
  const client = {
    recordRunDrift: async (_ns: string, _name: string, drift: ImageDriftRecord[]) => {
      written.push(drift);
      current = releasedRun(drift);
      return current;
    },
  } as unknown as KubeClient;
  const watch = startImageDriftWatch({
    pods: (ns) => pods.filter((p) => !ns || p.metadata?.namespace === ns),
    run: () => current,
    inScope: () => inScope,
    client,
    core,
    clock: { now: () => T0 },
    log: pino({ level: 'silent' }),
  });
  return { watch, events, written, pods };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test('the watch: one Warning ImageDrift Event on the Revision and one line on the run per finding, not again on a resync; the gauge counts now', async (t) => {
  const { watch, events, written, pods } = watchWith([revisionPod('web-1', `x@${B}`), revisionPod('web-2', `x@${A}`)], releasedRun());
  watch.checkAll();
  await settle();
  await watch.stop();
  t.deepEqual(events, [
    {
      reason: 'ImageDrift',
      message: `image drift: pod web-1 container user-container runs ${B} but hooks approved ${A}; the pod runs an image its pre-start hooks were not asked about`,
      involved: 'Revision/web-00001/u1',
    },
  ]);
  t.is(written.length, 1);
  t.like(written[0]?.[0], { pod: 'web-1', container: 'user-container', expected: A, running: B, detectedAt: T0.toISOString() });

  // A new term (a new leader): the run's record says it was told.
  const next = watchWith(pods, releasedRun(written[0]));
  next.watch.checkAll();
  for (const p of pods) next.watch.podChanged(p);
  await settle();
  t.deepEqual(next.watch.gauges(), [{ namespace: 'team', revision: 'web-00001', value: 1 }]);
  await next.watch.stop();
  t.deepEqual(next.events, [], 'told once, not on every resync or term');
  t.deepEqual(next.written, []);
});

test('the watch: nothing for a pod on the approved digest, a run not released, another Revision’s pod, a namespace out of scope', async (t) => {
  const control = watchWith([revisionPod('web-1', `x@${A}`)], releasedRun());
  control.watch.checkAll();
  await settle();
  t.deepEqual(control.watch.gauges(), []);
  await control.watch.stop();
  t.deepEqual(control.events, []);

  const running = { ...releasedRun(), status: { phase: 'Running' as const, hooks: [], conditions: [] } };
  const cases = [
    watchWith([revisionPod('web-1', `x@${B}`)], running),
    watchWith([revisionPod('web-1', `x@${B}`, 'another-uid')], releasedRun()),
    watchWith([revisionPod('web-1', `x@${B}`)], releasedRun(), false),
  ];
  for (const c of cases) {
    c.watch.checkAll();
    await settle();
    await c.watch.stop();
    t.deepEqual(c.events, []);
  }
});

test('prestart_gate_image_drift: one series per drifted Revision while leading, none otherwise', async (t) => {
  const metrics = createMetrics();
  const leader = { isLeader: true };
  metrics.watch({ revisions: { list: () => [] }, runs: { get: () => undefined } }, leader);
  metrics.imageDrift(() => [{ namespace: 'team', revision: 'web-00001', value: 2 }]);
  t.regex(await metrics.registry.metrics(), /^prestart_gate_image_drift\{namespace="team",revision="web-00001"\} 2$/m);
  leader.isLeader = false;
  t.notRegex(await metrics.registry.metrics(), /^prestart_gate_image_drift\{/m);
});

test('kn prestart why on a released run with drift says what runs and what the hooks approved', (t) => {
  const why = whyParagraph(
    fullRun([{ pod: 'web-1', container: 'user-container', expected: A, running: B, detectedAt: T0.toISOString() }]),
    T0,
  );
  t.regex(why, /^Revision web-00001 in team is not held: it was released at 2026-12-05T10:00:00.000Z/);
  t.true(why.includes(`Image drift: pod web-1 container user-container runs ${B} but hooks approved ${A}`), why);
  t.false(whyParagraph(fullRun(), T0).includes('drift'));
});
