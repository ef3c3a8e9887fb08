// A new run's first requests (issue 14): the shell sends them once the create returned (the run's
// spec.startedAt records them; no status write comes first), named by the UID the apiserver gave
// the run. A run that starts Pending gets its status written right after the create.
import test from 'ava';
import pino from 'pino';
import { type RunObject, toRunView } from '../../../../api/resources.ts';
import type { PrestartRunSpec, PrestartRunStatus } from '../../../../api/types.ts';
import { type ApplyContext, applyActions } from '../../../../gate/controller/apply.ts';
import type { BackgroundWrites } from '../../../../gate/controller/background-writes.ts';
import { decide, HOOK_CACHE_GRACE_MS } from '../../../../gate/core/decide.ts';
import { runStatusOf } from '../../../../gate/core/first-stage.ts';
import type { HookSends } from '../../../../gate/delivery/send-queue.ts';
import type { KubeClient } from '../../../../gate/kube/kube-client.ts';
import { heldRevision, hook, observed, T0 } from '../core/_builders.ts';

function setup(fail?: 'create' | 'status', hooks = [hook('db'), hook('cache'), hook('warm', { order: 1 })], now = T0) {
  const log: string[] = [];
  const client = {
    createRun: async (_rev: unknown, spec: PrestartRunSpec, status: PrestartRunStatus | undefined): Promise<RunObject> => {
      log.push('create');
      if (fail === 'create') throw new Error('409 already exists');
      if (status) {
        log.push('status');
        if (fail === 'status') throw new Error('500 status write');
      }
      return { metadata: { name: 'hello-00001', namespace: 'team-a', uid: 'created-uid' }, spec, ...(status ? { status } : {}) };
    },
  } as unknown as KubeClient;
  const sends = {
    exclusive: <T>(_rev: unknown, fn: () => Promise<T>) => fn(),
    request: (_rev: unknown, runUID: string | undefined, h: { name: string }, attempt: number, deadline: string) =>
      log.push(`send ${h.name} ${runUID} ${attempt} ${deadline}`),
  } as unknown as HookSends;
  const o = observed(heldRevision(['db', 'cache', 'warm']), hooks, { now });
  const ctx = {
    client,
    sends,
    revision: o.revision,
    revisionResourceVersion: '1',
    run: undefined,
    clock: { now: () => new Date('2025-01-01T00:00:00.000Z') },
    log: pino({ level: 'silent' }),
    background: {} as BackgroundWrites,
    retry: () => undefined,
  } as unknown as ApplyContext;
  return { log, ctx, actions: decide(o).actions };
}

test('the first stage is sent once the create returned, named by the new run’s UID; its status is not written first', async (t) => {
  const { log, ctx, actions } = setup();
  t.is(await applyActions(actions, ctx), 'all');
  t.deepEqual(log, ['create', 'send db created-uid 1 2025-01-01T00:01:00.000Z', 'send cache created-uid 1 2025-01-01T00:01:00.000Z']);
  t.is(ctx.run?.metadata?.uid, 'created-uid', 'later actions of the list work from the created run');
  t.is(ctx.run?.spec?.startedAt, '2025-01-01T00:00:00.000Z');
  t.is(ctx.run && runStatusOf(toRunView(ctx.run))?.phase, 'Running', 'the start the spec records implies the status');
});

test('a create that fails sends nothing', async (t) => {
  const { log, ctx, actions } = setup('create');
  await t.throwsAsync(applyActions(actions, ctx));
  t.false(log.some((l) => l.startsWith('send')));
});

test('a run that starts Pending (a hook not found) has its status written right after the create, and nothing is sent', async (t) => {
  // Past the grace for hooks the cache has not seen yet, so the missing one is not found.
  const { log, ctx, actions } = setup(undefined, [hook('db'), hook('cache')], new Date(T0.getTime() + HOOK_CACHE_GRACE_MS));
  t.is(await applyActions(actions, ctx), 'all');
  t.deepEqual(log, ['create', 'status']);
  t.is(ctx.run?.status?.phase, 'Pending');
});
