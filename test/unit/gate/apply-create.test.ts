// A new run's first requests (issue 14): the shell sends them only once the create and its status
// write both returned (record, then send), named by the UID the apiserver gave the run.
import test from 'ava';
import pino from 'pino';
import type { RunObject } from '../../../api/resources.ts';
import type { PrestartRunSpec, PrestartRunStatus } from '../../../api/types.ts';
import { decide } from '../../../gate/core/decide.ts';
import { type ApplyContext, applyActions } from '../../../gate/shell/apply.ts';
import type { BackgroundWrites } from '../../../gate/shell/background.ts';
import type { KubeClient } from '../../../gate/shell/kube-client.ts';
import type { HookSends } from '../../../gate/shell/sender.ts';
import { heldRevision, hook, observed } from '../core/_builders.ts';

function setup(fail?: 'create' | 'status') {
  const log: string[] = [];
  const client = {
    createRun: async (_rev: unknown, spec: PrestartRunSpec, status: PrestartRunStatus): Promise<RunObject> => {
      log.push('create');
      if (fail === 'create') throw new Error('409 already exists');
      log.push('status');
      if (fail === 'status') throw new Error('500 status write');
      return { metadata: { name: 'hello-00001', namespace: 'team-a', uid: 'created-uid' }, spec, status };
    },
  } as unknown as KubeClient;
  const sends = {
    exclusive: <T>(_rev: unknown, fn: () => Promise<T>) => fn(),
    request: (_rev: unknown, runUID: string | undefined, h: { name: string }, attempt: number, deadline: string) =>
      log.push(`send ${h.name} ${runUID} ${attempt} ${deadline}`),
  } as unknown as HookSends;
  const o = observed(heldRevision(['db', 'cache', 'warm']), [hook('db'), hook('cache'), hook('warm', { order: 1 })]);
  const ctx = {
    client,
    sends,
    revision: o.revision,
    revisionResourceVersion: '1',
    run: undefined,
    log: pino({ level: 'silent' }),
    background: {} as BackgroundWrites,
    retry: () => undefined,
  } as unknown as ApplyContext;
  return { log, ctx, actions: decide(o).actions };
}

test('the first stage is sent after the created status is stored, named by the new run’s UID', async (t) => {
  const { log, ctx, actions } = setup();
  t.is(await applyActions(actions, ctx), 'all');
  t.deepEqual(log, [
    'create',
    'status',
    'send db created-uid 1 2025-01-01T00:01:00.000Z',
    'send cache created-uid 1 2025-01-01T00:01:00.000Z',
  ]);
  t.is(ctx.run?.metadata?.uid, 'created-uid', 'later actions of the list work from the created run');
  t.is(ctx.run?.status?.phase, 'Running');
});

for (const fail of ['create', 'status'] as const) {
  test(`a ${fail} that fails sends nothing`, async (t) => {
    const { log, ctx, actions } = setup(fail);
    await t.throwsAsync(applyActions(actions, ctx));
    t.false(
      log.some((l) => l.startsWith('send')),
      'a run left without status is started by rule 11',
    );
  });
}
