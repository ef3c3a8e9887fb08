import test from 'ava';
import type { PrestartRunStatus, PrestartRunView } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import { applyReply, deliveryFailureReply, GATE_REPLY_KEY, invalidReplyFailure, requestRef } from '../../../../gate/core/reply.ts';
import { contributionsOf } from '../../../../gate/core/status.ts';
import type { ReplyResult } from '../../../../gate/core/types.ts';
import { apply, at, heldRevision, hook, observed, reply, storeStarted } from './_builders.ts';

/** A run with db (and cache) Requested at attempt 1. */
function requestedRun(hooks = [hook('db', { allowed: ['env', 'volume'] }), hook('cache')]): PrestartRunView {
  let o = observed(heldRevision(hooks.map((h) => h.name)), hooks);
  o = storeStarted(apply(o, decide(o).actions)); // created with its first stage requested, its status stored
  if (!o.run) throw new Error('no run');
  return o.run;
}

function statusOf(result: ReplyResult): PrestartRunStatus {
  if (result.type !== 'applied' && result.type !== 'progress') throw new Error(JSON.stringify(result));
  return result.status;
}

const withRunStatus = (run: PrestartRunView, status: PrestartRunStatus): PrestartRunView => ({ ...run, status });

test('a success marks the hook Succeeded and leaves the run phase to decide()', (t) => {
  const run = requestedRun();
  const result = applyReply(run, reply(run, 'db', { message: 'created database shop' }), at(3));
  t.is(result.type, 'applied');
  const status = statusOf(result);
  t.like(status.hooks[0], {
    name: 'db',
    phase: 'Succeeded',
    attempt: 1,
    answeredAt: at(3).toISOString(),
    message: 'created database shop',
    requestedAt: at(0).toISOString(),
  });
  t.like(status.hooks[1], { name: 'cache', phase: 'Requested' });
  t.is(status.summary, '1/2');
  t.is(status.phase, 'Running');
});

test('a failure keeps its message and drops any contributions', (t) => {
  const run = requestedRun();
  const status = statusOf(
    applyReply(
      run,
      reply(run, 'db', {
        outcome: 'failed',
        message: 'quota\nexceeded',
        contributions: [{ name: 'db', secretName: 'db', as: 'env', env: { A: 'a' } }],
      }),
      at(1),
    ),
  );
  t.like(status.hooks[0], { phase: 'Failed', message: 'quota exceeded' });
  t.is(status.hooks[0]?.contributions, undefined);
});

test('the same reply twice is a duplicate', (t) => {
  const run = requestedRun();
  const r = reply(run, 'db');
  const after = withRunStatus(run, statusOf(applyReply(run, r, at(1))));
  t.deepEqual(applyReply(after, r, at(2)), { type: 'duplicate' });
  t.deepEqual(applyReply(after, { ...r, eventKey: 'other/id' }, at(2)), { type: 'duplicate' });
});

test('a reply with the other outcome after the hook finished is rejected', (t) => {
  const run = requestedRun();
  const after = withRunStatus(run, statusOf(applyReply(run, reply(run, 'db'), at(1))));
  const result = applyReply(after, reply(after, 'db', { outcome: 'failed' }), at(2));
  t.like(result, { type: 'rejected', permanent: true });
  t.regex((result as { reason: string }).reason, /already Succeeded/);
  t.like(applyReply(after, reply(after, 'db', { outcome: 'progress', message: 'late' }), at(2)), { type: 'rejected' });
});

test('stale, future and unknown replies are rejected', (t) => {
  const run = requestedRun();
  const retried: PrestartRunView = withRunStatus(run, {
    ...(run.status as PrestartRunStatus),
    hooks: (run.status as PrestartRunStatus).hooks.map((h) => (h.name === 'db' ? { ...h, attempt: 2 } : h)),
  });
  const reason = (r: ReplyResult) => (r.type === 'rejected' ? r.reason : `not rejected: ${r.type}`);
  t.regex(reason(applyReply(retried, reply(retried, 'db', { attempt: 1 }), at(1))), /stale attempt 1/);
  t.regex(reason(applyReply(run, reply(run, 'db', { attempt: 2 }), at(1))), /never requested/);
  t.regex(reason(applyReply(run, reply(run, 'nope'), at(1))), /unknown hook nope/);
  t.regex(reason(applyReply(run, reply(run, 'db', { revisionUID: 'uid-other' }), at(1))), /revision UID/);
  t.regex(reason(applyReply(run, reply(run, 'db', { revision: 'hello-00009' }), at(1))), /does not belong/);
});

test('a final reply for a hook that was never requested (still Pending) is refused and changes nothing', (t) => {
  // warm (order 2) waits for db (order 1): a genuine reply for it cannot exist yet.
  const run = requestedRun([hook('db', { order: 1 }), hook('warm', { order: 2 })]);
  t.like(run.status?.hooks[1], { name: 'warm', phase: 'Pending', attempt: 1 });
  for (const outcome of ['succeeded', 'failed', 'progress'] as const) {
    const result = applyReply(run, reply(run, 'warm', { outcome, progress: 50 }), at(1));
    t.like(result, { type: 'rejected', permanent: true }, outcome);
    t.regex(
      (result as { reason: string }).reason,
      new RegExp(`hook warm has not been requested yet \\(attempt 1 is Pending\\); ${outcome} reply refused`),
    );
  }
});

test('a reply for an earlier run of the same Revision (deleted and created again) is refused, whatever its attempt', (t) => {
  const run = requestedRun();
  const earlier = reply(run, 'db', { runUID: 'run-uid-0', attempt: 1 });
  const result = applyReply(run, earlier, at(1));
  t.like(result, { type: 'rejected', permanent: true });
  t.regex(
    (result as { reason: string }).reason,
    /^reply for an earlier PrestartRun team-a\/hello-00001 \(uid run-uid-0, now run-uid-1\): the run was deleted and started over/,
  );
  // A run view without its UID cannot tell runs apart: nothing is accepted for it.
  t.like(applyReply({ ...run, uid: '' }, reply(run, 'db'), at(1)), { type: 'rejected', permanent: true });
});

test('across an upgrade: a v1 reply (no run UID) counts only for a run an earlier release created, never for a run of this one', (t) => {
  const run = requestedRun();
  const { runUID: _none, ...v1 } = reply(run, 'db');
  t.like(applyReply({ ...run, legacyIds: true }, v1, at(1)), { type: 'applied' });
  const refused = applyReply(run, v1, at(1));
  t.like(refused, { type: 'rejected', permanent: true });
  t.regex((refused as { reason: string }).reason, /uid none: a v1 id, now run-uid-1/);
  // A v2 reply (naming a run) never counts for a legacy run: that run's requests carried v1 ids.
  t.like(applyReply({ ...run, legacyIds: true }, reply(run, 'db'), at(1)), { type: 'rejected', permanent: true });
});

test('a reply for a hook that is no longer waiting is rejected', (t) => {
  const run = requestedRun();
  const status = run.status as PrestartRunStatus;
  for (const phase of ['Cancelled', 'TimedOut'] as const) {
    const moved = withRunStatus(run, { ...status, hooks: status.hooks.map((h) => ({ ...h, phase })) });
    t.like(applyReply(moved, reply(moved, 'db'), at(1)), { type: 'rejected', permanent: true });
  }
});

test('a progress report updates message and progress and keeps the hook Requested', (t) => {
  const run = requestedRun();
  const r = reply(run, 'db', { outcome: 'progress', message: 'restoring snapshot', progress: 40 });
  const result = applyReply(run, r, at(1));
  t.is(result.type, 'progress');
  const status = statusOf(result);
  t.like(status.hooks[0], { phase: 'Requested', message: 'restoring snapshot', progress: 40 });
  t.deepEqual(applyReply(withRunStatus(run, status), r, at(2)), { type: 'duplicate' });
});

test('only allowed and well-formed contributions are kept; the rest are named in the message', (t) => {
  const run = requestedRun();
  const status = statusOf(
    applyReply(
      run,
      reply(run, 'db', {
        message: 'ok',
        contributions: [
          { name: 'db', secretName: 'db-credentials', as: 'env', env: { DB_URL: 'url', DB_PASSWORD: 'password' } },
          { name: 'files', secretName: 'db-tls', as: 'volume' },
          { name: 'all', secretName: 'db-credentials', as: 'envFrom' },
          { name: 'bad', secretName: 'Not_A_Name', as: 'volume' },
          { name: 'db', secretName: 'other', as: 'volume' },
          { name: 'Upper', secretName: 'x', as: 'volume' },
          { name: 'noenv', secretName: 'x', as: 'env' },
        ],
      }),
      at(1),
    ),
  );
  const hookStatus = status.hooks[0];
  t.deepEqual(
    hookStatus?.contributions?.map((c) => c.name),
    ['db', 'files'],
  );
  const message = hookStatus?.message ?? '';
  t.true(message.startsWith('ok; dropped contributions: '), message);
  t.regex(message, /all: kind envFrom not allowed \(allowed: env, volume\)/);
  t.regex(message, /bad: secretName must be a DNS-1123 subdomain/);
  t.regex(message, /db: duplicate name/);
  t.regex(message, /Upper: name must be a DNS-1123 label/);
  t.regex(message, /noenv: as=env needs a non-empty env map/);
});

test('a hook that may not contribute anything has every contribution dropped', (t) => {
  const run = requestedRun();
  const status = statusOf(applyReply(run, reply(run, 'cache', { contributions: [{ name: 'c', secretName: 'c', as: 'envFrom' }] }), at(1)));
  t.is(status.hooks[1]?.contributions, undefined);
  t.regex(status.hooks[1]?.message ?? '', /kind envFrom not allowed \(allowed: none\)/);
});

test('a permanent refusal of a request fails the hook at once; a retriable one waits for the resend', (t) => {
  const run = requestedRun();
  const ref = requestRef({ namespace: run.namespace, name: run.name, uid: run.spec.revisionUID }, run.uid, 'db', 1);
  t.is(deliveryFailureReply(ref, { retriable: true, reason: 'POST http://db/: hook answered 503' }), undefined);
  const failure = deliveryFailureReply(ref, { retriable: false, reason: 'POST http://db/: hook answered 404' });
  t.deepEqual(failure, {
    namespace: run.namespace,
    revision: run.name,
    revisionUID: run.spec.revisionUID,
    runUID: run.uid,
    hook: 'db',
    attempt: 1,
    outcome: 'failed',
    message: 'the hook could not take the request: POST http://db/: hook answered 404',
    eventKey: GATE_REPLY_KEY,
  });
  if (!failure) return;
  const status = statusOf(applyReply(run, failure, at(1)));
  t.like(status.hooks[0], { phase: 'Failed', message: 'the hook could not take the request: POST http://db/: hook answered 404' });
});

test('an invalid synchronous answer fails the hook with the reason it was refused', (t) => {
  const run = requestedRun();
  const failure = invalidReplyFailure(
    requestRef({ namespace: run.namespace, name: run.name, uid: run.spec.revisionUID }, run.uid, 'cache', 1),
    'bad replyid',
  );
  t.like(failure, { hook: 'cache', attempt: 1, outcome: 'failed', message: 'the hook answered with an invalid reply: bad replyid' });
  t.like(statusOf(applyReply(run, failure, at(1))).hooks[1], { phase: 'Failed' });
});

test('a pod gets the contributions of the hooks that succeeded, and only those', (t) => {
  const env = { name: 'db', secretName: 'db', as: 'env' as const, env: { A: 'a' } };
  const volume = { name: 'tls', secretName: 'tls', as: 'volume' as const };
  const status = {
    hooks: [
      { name: 'db', phase: 'Succeeded' as const, attempt: 1, contributions: [env] },
      { name: 'tls', phase: 'Failed' as const, attempt: 1, contributions: [volume] },
      { name: 'cache', phase: 'Succeeded' as const, attempt: 1 },
    ],
  };
  t.deepEqual(contributionsOf(status), [env]);
  t.deepEqual(contributionsOf(undefined), []);
});
