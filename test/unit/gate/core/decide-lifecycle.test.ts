import test from 'ava';
import {
  CANCEL_FINALIZER,
  HOLD_LABEL,
  HOOKS_ANNOTATION,
  INJECT_LABEL,
  type PrestartRunStatus,
  REASON_ANNOTATION,
} from '../../../../api/types.ts';
import { decide, FOREIGN_RUN_REQUEUE_MS, HOOK_CACHE_GRACE_MS } from '../../../../gate/core/decide.ts';
import { runStatusOf, STARTED_STATUS_DELAY_MS } from '../../../../gate/core/first-stage.ts';
import { applyReply } from '../../../../gate/core/reply.ts';
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
  reply,
  revision,
  step,
  storeStarted,
  T0,
  types,
} from './_builders.ts';

test('an unheld Revision without a run is never touched', (t) => {
  t.deepEqual(decide(observed(revision(), [hook('db')])), { actions: [] });
});

test('a held Revision gets a run with snapshots of its hooks, created with its first order already requested', (t) => {
  const o = observed(heldRevision(['db', 'cache', 'warm']), [hook('db', { timeout: '2m' }), hook('cache'), hook('warm', { order: 1 })]);
  const d = decide(o);
  t.deepEqual(types(d), ['createRun'], 'no sendRequest: the run has no UID before it is created');
  const [create] = ofType(d, 'createRun');
  t.is(create?.spec.revisionUID, 'uid-1');
  t.deepEqual(
    create?.spec.hooks.map((h) => [h.name, h.timeoutSeconds]),
    [
      ['db', 120],
      ['cache', 60],
      ['warm', 60],
    ],
  );
  t.is(create?.status.phase, 'Running');
  const sent = T0.toISOString();
  t.deepEqual(create?.status.hooks, [
    { name: 'db', phase: 'Requested', attempt: 1, requestedAt: sent, lastSentAt: sent, deadline: at(120).toISOString() },
    { name: 'cache', phase: 'Requested', attempt: 1, requestedAt: sent, lastSentAt: sent, deadline: at(60).toISOString() },
    { name: 'warm', phase: 'Pending', attempt: 1 },
  ]);
  t.is(create?.status.summary, '0/3');
  t.deepEqual(create?.status.conditions, [
    { type: 'Ready', status: 'Unknown', reason: 'Running', message: 'waiting for db, cache, warm', lastTransitionTime: sent },
  ]);
  t.deepEqual(
    create?.requests,
    [
      { hook: create?.spec.hooks[0], attempt: 1, deadline: at(120).toISOString() },
      { hook: create?.spec.hooks[1], attempt: 1, deadline: at(60).toISOString() },
    ],
    'the requests the status records, for the shell to send once it is stored',
  );
  t.is(create?.storeStatus, false, 'the create records the requests (spec.startedAt); the status they imply is stored later');
  t.is(create?.spec.startedAt, sent);
  t.is(d.requeueAfterMs, STARTED_STATUS_DELAY_MS, 'woken to store that status if no reply stored it first');
});

test('a started run whose status is not stored: the first reply stores it, with the request and the answer in one write', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decide(o).actions);
  t.is(o.run?.status, undefined, 'nothing but the create was written');
  t.deepEqual(decide({ ...o, now: at(0.5) }), { actions: [], requeueAfterMs: 500 }, 'no status write while a reply may still store it');
  const result = applyReply(o.run ?? (undefined as never), reply(o.run ?? (undefined as never), 'db'), at(0.2));
  if (result.type !== 'applied') throw new Error(JSON.stringify(result));
  t.like(result.status.hooks[0], { phase: 'Succeeded', requestedAt: T0.toISOString(), deadline: at(60).toISOString() });
  t.like(result.status, { phase: 'Running', summary: '1/1' });
});

test('a started run with no reply within STARTED_STATUS_DELAY_MS gets the status its start implies stored, and nothing is sent again', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decide(o).actions);
  const implied = runStatusOf(o.run ?? (undefined as never));
  const stored = step(t, o, at(1));
  t.deepEqual(stored.decision.actions, [{ type: 'updateRunStatus', status: implied as PrestartRunStatus }]);
  t.like(stored.next.run?.status?.hooks[0], { phase: 'Requested', requestedAt: T0.toISOString() });
});

test('the run as the informer brings it back is not asked again; the resend comes after resendInterval', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = storeStarted(apply(o, decide(o).actions));
  t.deepEqual(decide(o).actions, [], 'no second status write, no second send');
  t.deepEqual(decide({ ...o, now: at(1), leaderSince: at(-60) }), { actions: [], requeueAfterMs: 19_000 });
  const resent = decide({ ...o, now: at(20) });
  t.deepEqual(types(resent), ['sendRequest']);
  t.like(ofType(resent, 'sendRequest')[0], { runUID: RUN_UID, attempt: 1, deadline: at(60).toISOString() });
});

test('the whole way: create with the request, reply, release', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  const created = step(t, o);
  t.deepEqual(types(created.decision), ['createRun']);
  t.deepEqual(
    ofType(created.decision, 'createRun')[0]?.requests.map((r) => r.hook.name),
    ['db'],
  );
  o = created.next;
  t.deepEqual(hookPhases(o), { db: 'Requested' });
  t.is(o.run && runStatusOf(o.run)?.phase, 'Running');

  o = answer({ ...o, now: at(5) }, 'db', { message: 'database ready' });
  const released = step(t, o);
  t.deepEqual(types(released.decision), ['release', 'updateRunStatus', 'event:Normal:Released']);
  t.deepEqual(ofType(released.decision, 'release'), [{ type: 'release', inject: false, containers: CONTAINERS }]);
  o = released.next;
  const status = o.run?.status;
  t.is(status?.phase, 'Released');
  t.is(status?.releasedAt, at(5).toISOString());
  t.is(status?.summary, '1/1');
  t.like(
    status?.conditions.find((c) => c.type === 'Ready'),
    { status: 'True', reason: 'Released' },
  );
  t.false(HOLD_LABEL in o.revision.labels);
  t.false(o.revision.finalizers.includes(CANCEL_FINALIZER));
});

test('a hook that contributed bindings makes the release add the inject label', (t) => {
  let o = observed(heldRevision(['db']), [hook('db', { allowed: ['envFrom'] })]);
  o = apply(o, decide(o).actions);
  o = answer(o, 'db', { contributions: [{ name: 'db', secretName: 'db-credentials', as: 'envFrom' }] });
  const d = decide(o);
  t.deepEqual(ofType(d, 'release'), [{ type: 'release', inject: true, containers: CONTAINERS }]);
  t.is(apply(o, d.actions).revision.labels[INJECT_LABEL], 'true');
});

test('a crash between label removal and status write is finished on the unheld Revision', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decide(o).actions);
  o = answer(o, 'db');
  const d = decide(o);
  const onlyRelease = d.actions.filter((a) => a.type === 'release');
  o = apply(o, onlyRelease); // the status write never happened
  t.is(o.run?.status?.phase, 'Running');
  const finish = step(t, { ...o, now: at(30) });
  t.deepEqual(types(finish.decision), ['updateRunStatus', 'event:Normal:Released']);
  t.is(finish.next.run?.status?.phase, 'Released');
});

test('an unheld Revision whose run is still unfinished is left alone', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decide(o).actions);
  const unheld = { ...o, revision: { ...o.revision, labels: {} } };
  t.deepEqual(decide(unheld).actions, []);
  t.deepEqual(decide({ ...unheld, now: at(3600) }).actions, [], 'not even its deadlines are enforced');
});

test('a held Revision whose run says Released is released again (stale cache)', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decide(o).actions);
  o = answer(o, 'db');
  o = apply(o, decide(o).actions);
  const stale = { ...o, revision: heldRevision(['db']) };
  t.deepEqual(decide(stale).actions, [{ type: 'release', inject: false, containers: CONTAINERS }]);
});

test('a named hook the cache has not seen is waited for while the Revision is new (the apiserver may stamp ahead of it)', (t) => {
  const o = observed(heldRevision(['db', 'late']), [hook('db')]);
  t.deepEqual(decide(o), { actions: [], requeueAfterMs: 500 }, 'no run yet: nothing failed, nothing asked');
  t.deepEqual(decide({ ...o, now: at(9.8) }), { actions: [], requeueAfterMs: 200 });
  const arrived = decide({ ...o, now: at(1), hooks: new Map([...o.hooks, ['late', hook('late')]]) });
  t.deepEqual(
    ofType(arrived, 'createRun')[0]?.spec.hooks.map((h) => h.name),
    ['db', 'late'],
    'once the cache has it, the run starts with both',
  );
});

test('a named hook that does not exist fails the run closed, and nothing is sent', (t) => {
  let o = observed(heldRevision(['db', 'ghost']), [hook('db')], { now: at(HOOK_CACHE_GRACE_MS / 1000) });
  const created = decide(o);
  const [create] = ofType(created, 'createRun');
  t.like(create?.status, { phase: 'Pending', summary: '0/2' }, "the failure is advanceRun's, with its event and hold reason");
  t.like(create?.status.hooks[0], { name: 'db', phase: 'Pending' });
  t.like(create?.status.hooks[1], {
    name: 'ghost',
    phase: 'Failed',
    message: 'PrestartHook ghost not found',
  });
  t.deepEqual(create?.requests, [], 'db is not asked');
  t.is(created.requeueAfterMs, undefined);
  t.deepEqual(
    ofType(created, 'createRun')[0]?.spec.hooks.map((h) => h.name),
    ['db'],
  );
  o = apply(o, created.actions);
  const failed = step(t, o);
  t.deepEqual(types(failed.decision), ['updateRunStatus', 'setHoldReason', 'event:Warning:HookFailed']);
  t.is(failed.next.run?.status?.phase, 'Failed');
  t.regex(
    failed.next.revision.annotations[REASON_ANNOTATION] ?? '',
    /hook ghost failed: PrestartHook ghost not found; start over: kubectl delete prestartrun hello-00001 -n team-a/,
  );
});

test('a hook with an invalid spec fails the run closed', (t) => {
  const o = observed(heldRevision(['db']), [hook('db', { timeout: 'forever' })]);
  const [create] = ofType(decide(o), 'createRun');
  t.deepEqual(create?.spec.hooks, []);
  t.is(create?.status.phase, 'Pending');
  t.like(create?.status.hooks[0], { name: 'db', phase: 'Failed' });
  t.deepEqual(create?.requests, []);
  t.regex(create?.status.hooks[0]?.message ?? '', /PrestartHook db is invalid: timeout/);
});

test('a held Revision with a malformed hook list stays held and says why, once', (t) => {
  const rev = heldRevision([], { annotations: { [HOOKS_ANNOTATION]: 'db,cache' } });
  const { decision, next } = step(t, observed(rev, [hook('db')]));
  t.deepEqual(types(decision), ['setHoldReason', 'event:Warning:InvalidHooksAnnotation']);
  t.regex(next.revision.annotations[REASON_ANNOTATION] ?? '', /not a JSON list/);
  t.is(next.run, undefined);

  const missing = heldRevision([], { annotations: {} });
  t.regex(ofType(decide(observed(missing, [])), 'setHoldReason')[0]?.reason ?? '', /annotation is missing/);
});

test('a run whose status was never written gets one rebuilt from its spec', (t) => {
  let o = observed(heldRevision(['db', 'ghost']), [hook('db')], { now: at(HOOK_CACHE_GRACE_MS / 1000) });
  const [create] = ofType(decide(o), 'createRun');
  if (!create) throw new Error('no createRun');
  o = { ...o, run: { namespace: 'team-a', name: 'hello-00001', uid: 'run-uid-1', spec: create.spec } };
  const d = decide(o);
  const [update] = ofType(d, 'updateRunStatus');
  t.deepEqual(
    update?.status.hooks.map((h) => [h.name, h.phase]),
    [
      ['db', 'Pending'],
      ['ghost', 'Failed'],
    ],
    'the missing hook is still failed: the run does not fail open',
  );
  t.is(update?.status.phase, 'Failed');
});

test('a run without status and without a recorded start (an earlier release whose status write failed: nothing was sent) gets its first stage requested', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  const [create] = ofType(decide(o), 'createRun');
  if (!create) throw new Error('no createRun');
  const { startedAt: _notRecorded, ...spec } = create.spec;
  o = { ...o, run: { namespace: 'team-a', name: 'hello-00001', uid: RUN_UID, spec }, now: at(3) };
  const started = step(t, o);
  t.deepEqual(types(started.decision), ['updateRunStatus', 'sendRequest'], 'recorded, then sent');
  t.like(ofType(started.decision, 'sendRequest')[0], { runUID: RUN_UID, attempt: 1, deadline: at(63).toISOString() });
  t.deepEqual(hookPhases(started.next), { db: 'Requested' });
});

test('a run left over from an older Revision with the same name is not used', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decide(o).actions);
  const recreated = { ...o, revision: { ...o.revision, uid: 'uid-2' } };
  t.deepEqual(decide(recreated), { actions: [], requeueAfterMs: FOREIGN_RUN_REQUEUE_MS });
});

test('a held Revision with an empty hook list is released at once', (t) => {
  let o = observed(heldRevision([]), []);
  const [create] = ofType(decide(o), 'createRun');
  t.like(create, { status: { phase: 'Pending' }, requests: [] }, "the release and its event are advanceRun's");
  o = apply(o, decide(o).actions);
  const d = decide(o);
  t.deepEqual(types(d), ['release', 'updateRunStatus', 'event:Normal:Released']);
});
