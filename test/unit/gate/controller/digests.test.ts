// Issue 20, "hooks see what will run": no request goes out before the run records the containers
// with the digests Knative resolved; the release is refused when those digests changed after the
// hooks were asked; the release patch tests them; the caches keep what that needs.
import test from 'ava';
import pino from 'pino';
import { type RevisionObject, type RunObject, resolvedContainers, toRevisionView } from '../../../../api/resources.ts';
import { type ContainerImage, HOLD_LABEL, PRESTART_CONDITION, type PrestartRunSpec, REASON_ANNOTATION } from '../../../../api/types.ts';
import { renderRunTree } from '../../../../cli/prestart/render.ts';
import { type ApplyContext, applyActions } from '../../../../gate/controller/apply.ts';
import type { BackgroundWrites } from '../../../../gate/controller/background-writes.ts';
import { DIGEST_GRACE_MS, decide } from '../../../../gate/core/decide.ts';
import type { HookSends } from '../../../../gate/delivery/send-queue.ts';
import { heldRevisionView, runView } from '../../../../gate/kube/cache-views.ts';
import type { KubeClient } from '../../../../gate/kube/kube-client.ts';
import {
  answer,
  apply,
  at,
  CONTAINERS,
  heldRevision,
  hook,
  hookPhases,
  observed,
  ofType,
  RUN_UID,
  step,
  T0,
  types,
} from '../core/_builders.ts';

const DIGEST_A = `registry.example/app@sha256:${'a'.repeat(64)}`;
const DIGEST_B = `registry.example/app@sha256:${'b'.repeat(64)}`;
const resolved = (digest: string): ContainerImage[] => [{ name: 'user-container', image: 'registry.example/app:v1', digest }];

/** A held Revision Knative has not resolved yet, and a hook that holds it. */
function unresolved(overrides: Parameters<typeof heldRevision>[1] = {}) {
  return observed(heldRevision(['scan'], { containers: undefined, ...overrides }), [hook('scan')]);
}

test('startRun: no run for DIGEST_GRACE_MS while Knative resolves the digests; after that a waiting run, and nothing is asked', (t) => {
  const early = decide({ ...unresolved(), now: at(1) });
  t.deepEqual(early.actions, [], 'nothing yet: Knative usually resolves within the grace');
  t.is(early.requeueAfterMs, DIGEST_GRACE_MS - 1000);

  const o = { ...unresolved(), now: new Date(T0.getTime() + DIGEST_GRACE_MS) };
  const d = decide(o);
  t.deepEqual(types(d), ['createRun']);
  const [create] = ofType(d, 'createRun');
  t.is(create?.spec.containers, undefined, 'the run records no containers yet');
  t.is(create?.spec.startedAt, undefined, 'and no start');
  t.deepEqual(create?.requests, [], 'nothing is requested');
  t.is(create?.status.phase, 'Pending');
  t.like(create?.status.conditions[0], { type: 'Ready', status: 'Unknown', reason: 'ResolvingDigests' });
  t.regex(create?.status.conditions[0]?.message ?? '', /waiting for Knative to resolve the image digests/);

  // The waiting run, decided again: nothing to do until Knative writes its status.
  const next = apply(o, d.actions);
  t.deepEqual(decide({ ...next, now: at(600) }).actions, [], 'no request, no timeout, no release, however long it waits');
});

test('startRun: Knative could not resolve (ContainerHealthy False, ContainerMissing): the run says so with Knative’s reason, fails closed', (t) => {
  const conditions = [
    {
      type: 'ContainerHealthy',
      status: 'False' as const,
      reason: 'ContainerMissing',
      message: 'failed to resolve image to digest: GET https://registry.example/v2/app/manifests/v1: MANIFEST_UNKNOWN',
      lastTransitionTime: T0.toISOString(),
    },
  ];
  const o = { ...unresolved({ conditions }), now: at(30) };
  const d = decide(o);
  const [create] = ofType(d, 'createRun');
  t.like(create?.status.conditions[0], { type: 'Ready', status: 'False', reason: 'ContainerMissing' });
  t.regex(
    create?.status.conditions[0]?.message ?? '',
    /Knative could not resolve the image digests \(ContainerHealthy: failed to resolve .*MANIFEST_UNKNOWN\)/,
  );
  t.deepEqual(create?.requests, []);
  const waiting = apply(o, d.actions);
  t.false(
    decide({ ...waiting, now: at(3600) }).actions.some((a) => a.type === 'release' || a.type === 'sendRequest'),
    'never released, never asked',
  );
});

test('advanceRun: the digests arrive: the containers are recorded first, then the first stage requested, then sent', (t) => {
  const o = { ...unresolved(), now: at(5) };
  const waiting = apply(o, decide(o).actions);
  const now = { ...waiting, revision: { ...waiting.revision, containers: resolved(DIGEST_A) }, now: at(6) };
  const { decision, next } = step(t, now);
  t.deepEqual(types(decision), ['recordContainers', 'updateRunStatus', 'sendRequest'], 'record, then send');
  t.deepEqual(ofType(decision, 'recordContainers')[0]?.containers, resolved(DIGEST_A));
  t.is(ofType(decision, 'updateRunStatus')[0]?.status.phase, 'Running');
  t.deepEqual(next.run?.spec.containers, resolved(DIGEST_A));

  const released = step(t, answer(next, 'scan'), at(7));
  t.deepEqual(ofType(released.decision, 'release'), [{ type: 'release', inject: false, containers: resolved(DIGEST_A) }]);
});

test('the fast path stays: digests known at the create -> one create records containers and the first requests', (t) => {
  const o = observed(heldRevision(['scan'], { containers: resolved(DIGEST_A) }), [hook('scan')]);
  const d = decide(o);
  t.deepEqual(types(d), ['createRun']);
  const [create] = ofType(d, 'createRun');
  t.deepEqual(create?.spec.containers, resolved(DIGEST_A));
  t.truthy(create?.spec.startedAt);
  t.is(create?.requests.length, 1);
});

function answeredWith(digest: string) {
  const o = observed(heldRevision(['scan'], { containers: resolved(DIGEST_A) }), [hook('scan')]);
  const created = apply(o, decide(o).actions);
  return { ...answer({ ...created, now: at(5) }, 'scan'), revision: { ...created.revision, containers: resolved(digest) } };
}

test('advanceRun judge: a digest that changed after the hooks were asked fails the run (ImagesChanged), keeps the hold, says why and what to do', (t) => {
  const o = answeredWith(DIGEST_B);
  const d = decide(o);
  t.deepEqual(types(d), ['updateRunStatus', 'setHoldReason', 'event:Warning:ImagesChanged']);
  const status = ofType(d, 'updateRunStatus')[0]?.status;
  t.is(status?.phase, 'Failed');
  t.is(status?.releasedAt, undefined);
  const ready = status?.conditions.find((c) => c.type === 'Ready');
  t.like(ready, { status: 'False', reason: 'ImagesChanged' });
  t.is(ready?.message, `the images changed after the hooks were asked: container user-container: hooks saw ${DIGEST_A}, now ${DIGEST_B}`);
  const reason = ofType(d, 'setHoldReason')[0]?.reason ?? '';
  t.true(reason.startsWith(ready?.message ?? '?'));
  t.regex(reason, /to run every hook on what will run: kubectl delete prestartrun hello-00001 -n team-a$/);
  t.deepEqual(hookPhases(apply(o, d.actions)), { scan: 'Succeeded' }, 'what the hook answered stays recorded');

  // Final: deciding again does nothing, and digests that come back do not release it either.
  const failed = apply(o, d.actions);
  t.deepEqual(decide(failed).actions, []);
  const back = { ...failed, revision: { ...failed.revision, containers: resolved(DIGEST_A) } };
  t.false(
    decide(back).actions.some((a) => a.type === 'release'),
    'an ImagesChanged run is final: only a new run releases',
  );
});

test('advanceRun judge: digests no longer resolved at release time (a status emptied) fail the run too', (t) => {
  const o = answeredWith(DIGEST_A);
  const d = decide({ ...o, revision: { ...o.revision, containers: undefined } });
  t.false(d.actions.some((a) => a.type === 'release'));
  t.like(
    ofType(d, 'updateRunStatus')[0]?.status.conditions.find((c) => c.type === 'Ready'),
    {
      reason: 'ImagesChanged',
      message: 'the images changed after the hooks were asked: Knative no longer reports resolved digests for every container',
    },
  );
});

test('advanceRun judge: unchanged digests release, the release guarded by the recorded containers', (t) => {
  const d = decide(answeredWith(DIGEST_A));
  t.deepEqual(types(d), ['release', 'updateRunStatus', 'event:Normal:Released']);
  t.deepEqual(ofType(d, 'release')[0]?.containers, resolved(DIGEST_A));
});

test('releaseAgain: a held Revision whose Released run recorded other digests is not released again; the hold reason says why', (t) => {
  const o = answeredWith(DIGEST_A);
  const released = apply(o, decide(o).actions);
  // Held again in the observation (a stale cache), and the status now names another digest.
  const stale = { ...released, revision: { ...o.revision, containers: resolved(DIGEST_B) } };
  t.is(stale.run?.status?.phase, 'Released');
  const d = decide(stale);
  t.deepEqual(types(d), ['setHoldReason', 'event:Warning:ImagesChanged']);
  t.regex(ofType(d, 'setHoldReason')[0]?.reason ?? '', /hooks saw .*a{64}, now .*b{64}/);
  const same = { ...released, revision: { ...o.revision, containers: resolved(DIGEST_A) } };
  t.deepEqual(decide(same).actions, [{ type: 'release', inject: false, containers: resolved(DIGEST_A) }]);
});

test('a run of an earlier release (no containers, hook already asked) records the digests Knative reports, then goes on; it is never stuck', (t) => {
  const o = observed(heldRevision(['scan']), [hook('scan')]);
  const created = apply(o, decide(o).actions);
  const spec: PrestartRunSpec = { ...(created.run?.spec as PrestartRunSpec) };
  delete spec.containers;
  const legacy = { ...created, run: { ...(created.run as NonNullable<typeof created.run>), spec, legacyIds: true } };

  // Knative has not resolved (yet): nothing is resent without containers, nothing times out.
  const blind = { ...legacy, revision: { ...legacy.revision, containers: undefined }, now: at(3600) };
  t.false(
    decide(blind).actions.some((a) => a.type === 'sendRequest' || a.type === 'release'),
    'no request without containers, no release',
  );

  // Resolved: recorded first, then the resend a new term owes the Requested hook carries them.
  const d = decide({ ...legacy, now: at(10), leaderSince: at(9) });
  t.is(d.actions[0]?.type, 'recordContainers', 'recorded before anything else');
  t.deepEqual(ofType(d, 'recordContainers')[0]?.containers, CONTAINERS);
  t.true(d.actions.some((a) => a.type === 'sendRequest'));

  // Answered before the upgrade: recorded, then released at once, guarded by what it recorded.
  const answered = answer(legacy, 'scan', { runUID: undefined });
  const r = decide({ ...answered, now: at(10) });
  t.deepEqual(types(r).slice(0, 2), ['recordContainers', 'release']);
  t.deepEqual(ofType(r, 'release')[0]?.containers, CONTAINERS);
});

const knativeRevision = (status: RevisionObject['status']): RevisionObject => ({
  apiVersion: 'serving.knative.dev/v1',
  kind: 'Revision',
  metadata: { name: 'app-00001', namespace: 'team-a', uid: 'u1', labels: { [HOLD_LABEL]: 'true' } },
  spec: {
    containers: [
      { name: 'user-container', image: 'registry.example/app:v1' },
      { name: 'sidecar', image: 'dev.local/sidecar:v1' },
    ],
    initContainers: [{ name: 'migrate', image: 'registry.example/migrate:v1' }],
  },
  ...(status ? { status } : {}),
});

test('toRevisionView: containers only once Knative resolved every one, paired by position; an empty digest is none', (t) => {
  const failed = {
    type: 'ContainerHealthy',
    status: 'False' as const,
    reason: 'ContainerMissing',
    message: 'no such tag',
    lastTransitionTime: T0.toISOString(),
  };
  const gate = { type: PRESTART_CONDITION, status: 'False' as const, reason: 'Waiting', lastTransitionTime: T0.toISOString() };
  const pending = knativeRevision({ conditions: [failed, gate] });
  t.is(toRevisionView(pending).containers, undefined);
  const view = heldRevisionView(pending);
  t.deepEqual(
    view.status?.conditions?.map((c) => c.type),
    ['ContainerHealthy', PRESTART_CONDITION],
    'why resolution failed is kept while unresolved',
  );

  const partial = knativeRevision({ containerStatuses: [{ name: 'user-container', imageDigest: DIGEST_A }, { name: 'sidecar' }] });
  t.is(resolvedContainers(partial), undefined, 'init containers not resolved yet');

  const done = knativeRevision({
    conditions: [{ ...failed, type: 'ResourcesAvailable', message: 'held by prestart' }, gate],
    containerStatuses: [
      { name: 'user-container', imageDigest: DIGEST_A },
      { name: 'sidecar', imageDigest: '' },
    ],
    initContainerStatuses: [{ name: 'migrate', imageDigest: DIGEST_B }],
  });
  const expected: ContainerImage[] = [
    { name: 'user-container', image: 'registry.example/app:v1', digest: DIGEST_A },
    { name: 'sidecar', image: 'dev.local/sidecar:v1' },
    { name: 'migrate', image: 'registry.example/migrate:v1', digest: DIGEST_B, init: true },
  ];
  t.deepEqual(toRevisionView(done).containers, expected);
  const slim = heldRevisionView(done);
  t.deepEqual(toRevisionView(slim).containers, expected, 'the held cache keeps what the view needs');
  t.deepEqual(
    slim.status?.conditions?.map((c) => c.type),
    [PRESTART_CONDITION],
    'once resolved, Knative’s conditions are not kept',
  );
});

test('a Released run is cached slim but keeps the containers it recorded (releaseAgain compares them)', (t) => {
  const run: RunObject = {
    metadata: { name: 'app-00001', namespace: 'team-a', uid: 'r1' },
    spec: { revisionUID: 'u1', hooks: [], containers: resolved(DIGEST_A) },
    status: { phase: 'Released', hooks: [], conditions: [] },
  };
  t.deepEqual(runView(run).spec.containers, resolved(DIGEST_A));
});

test('the shell sends what the run records: the created run’s containers, then the recorded ones after recordContainers', async (t) => {
  const log: string[] = [];
  const sent: (readonly ContainerImage[] | undefined)[] = [];
  const client = {
    createRun: async (_rev: unknown, spec: PrestartRunSpec): Promise<RunObject> => {
      log.push('create');
      return { metadata: { name: 'hello-00001', namespace: 'team-a', uid: RUN_UID, resourceVersion: '1' }, spec };
    },
    recordRunContainers: async (run: RunObject, containers: ContainerImage[]): Promise<RunObject> => {
      log.push('record');
      return { ...run, metadata: { ...run.metadata, resourceVersion: '2' }, spec: { ...run.spec, containers } };
    },
    replaceRunStatus: async (run: RunObject, status: RunObject['status']): Promise<RunObject> => {
      log.push('status');
      return { ...run, status };
    },
  } as unknown as KubeClient;
  const sends = {
    exclusive: <T>(_rev: unknown, fn: () => Promise<T>) => fn(),
    request: (...args: unknown[]) => {
      log.push('send');
      sent.push(args[6] as readonly ContainerImage[] | undefined);
    },
  } as unknown as HookSends;
  const ctx = (revision: ReturnType<typeof heldRevision>, run?: RunObject) =>
    ({
      client,
      sends,
      revision,
      revisionResourceVersion: '1',
      run,
      clock: { now: () => T0 },
      log: pino({ level: 'silent' }),
      background: {} as BackgroundWrites,
      retry: () => undefined,
    }) as unknown as ApplyContext;

  const fast = observed(heldRevision(['scan'], { containers: resolved(DIGEST_A) }), [hook('scan')]);
  await applyActions(decide(fast).actions, ctx(fast.revision));
  t.deepEqual(log, ['create', 'send']);
  t.deepEqual(sent, [resolved(DIGEST_A)]);

  log.length = 0;
  sent.length = 0;
  const o = { ...unresolved(), now: at(5) };
  const waiting = apply(o, decide(o).actions);
  const runObj: RunObject = {
    metadata: { name: 'hello-00001', namespace: 'team-a', uid: RUN_UID, resourceVersion: '1' },
    spec: waiting.run?.spec as PrestartRunSpec,
    status: waiting.run?.status,
  };
  const resolvedNow = { ...waiting, revision: { ...waiting.revision, containers: resolved(DIGEST_B) }, now: at(6) };
  await applyActions(decide(resolvedNow).actions, ctx(resolvedNow.revision, runObj));
  t.deepEqual(log, ['record', 'status', 'send']);
  t.deepEqual(sent, [resolved(DIGEST_B)]);
});

test('the hold reason of an ImagesChanged run is on the Revision after the fold', (t) => {
  const o = answeredWith(DIGEST_B);
  const after = apply(o, decide(o).actions);
  t.regex(after.revision.annotations[REASON_ANNOTATION] ?? '', /^the images changed after the hooks were asked/);
});

test('kn prestart get shows the digests the hooks were asked about', (t) => {
  const run: RunObject = {
    metadata: { name: 'app-00001', namespace: 'team-a' },
    spec: {
      revisionUID: 'u1',
      hooks: [],
      containers: [...resolved(DIGEST_A), { name: 'migrate', image: 'dev.local/migrate:v1', init: true }],
    },
  };
  const tree = renderRunTree(run, T0);
  t.true(tree.includes(`Images:     user-container  ${DIGEST_A}\n`));
  t.true(tree.includes('            init migrate  dev.local/migrate:v1 (as written: Knative does not resolve its registry)\n'));
});
