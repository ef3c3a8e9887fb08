// kill -9 of the gate at the worst moments, then a restart: nothing is lost, and the Revision is
// released exactly when its hook succeeded. The gate runs as its own process (the CLI) and dies
// by SIGKILL at a named crash point (KNATIVE_PRESTART_CRASH_AT, see gate/runtime/crashpoints.ts).

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { type GatePorts, type GateProcess, spawnGate } from '@knative-prestart/devcluster/gate/process.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';

let env: GateEnv;
let ports: GatePorts;
let hookServer: HookServer;
let hookName: string;
const running: GateProcess[] = [];

test.before(async () => {
  env = await gateEnv('crash', { inProcess: false });
  const [webhook, sink] = await freePorts(2);
  ports = { webhook: webhook as number, sink: sink as number };
  hookServer = await startHookServer(async () => ({ status: 202 }));
  hookName = `${env.instance}-db`;
  await env.createHook(hookName, {
    match: env.annotationMatch('crash'),
    resendInterval: '2s',
    delivery: { transport: 'http', url: hookServer.url },
  });
});

// The scenarios share the gate's ports: each ends by stopping the gate it restarted.
test.afterEach.always(async () => {
  await Promise.all(running.splice(0).map((g) => g.stop()));
});

test.after.always(async () => {
  await hookServer?.close();
  await env?.stop();
});

async function start(crashAt?: string): Promise<GateProcess> {
  const gate = await spawnGate(env, ports, crashAt);
  running.push(gate);
  return gate;
}

async function killedAt(gate: GateProcess, point: string): Promise<void> {
  const { signal } = await gate.exited;
  if (signal !== 'SIGKILL') throw new Error(`expected the gate to die by SIGKILL at ${point}; output:\n${gate.output()}`);
}

const requestFor = (revision: string) => () =>
  hookServer.requests.find((r) => r.data.revision.name === revision && r.data.action === 'start');

/** The reply a hook sends, retried as hooks do while the gate is down or the connection breaks. */
async function replyUntilAccepted(req: ReceivedRequest): Promise<number> {
  return waitFor(
    () =>
      asyncReply(req, 'succeeded').then(
        (r) => (r.status === 202 ? r.status : undefined),
        () => undefined,
      ),
    { timeoutMs: 60_000, what: 'the reply to be accepted' },
  );
}

test.serial('killed right after sending a request: the restarted gate takes the reply and releases', async (t) => {
  const gate = await start('after-send');
  await env.createRevision('send-00001', { annotations: { crash: 'yes' } });
  const req = await waitFor(requestFor('send-00001'), { timeoutMs: 60_000, what: 'the request' });
  await killedAt(gate, 'after-send');
  t.true(isHeld(await env.getRevision('send-00001')), 'held while the gate is down');
  await start();
  t.is(await replyUntilAccepted(req), 202);
  await env.waitReleased('send-00001', 60_000);
  t.is((await env.waitForRun('send-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.hooks?.[0]?.attempt, 1);
});

test.serial(
  'killed right after creating the run, before its request went out: the restarted gate asks the hook and releases',
  async (t) => {
    const gate = await start('after-run-created');
    await env.createRevision('made-00001', { annotations: { crash: 'yes' } });
    await killedAt(gate, 'after-run-created');
    const run = await env.getRun('made-00001');
    t.truthy(run?.spec?.startedAt, 'the run records its start');
    t.falsy(requestFor('made-00001')(), 'nothing was sent');
    await start();
    const req = await waitFor(requestFor('made-00001'), { timeoutMs: 60_000, what: 'the request, sent by the restarted gate' });
    await env.waitForRun('made-00001', 'Requested stored', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
    t.is(await replyUntilAccepted(req), 202);
    await env.waitReleased('made-00001', 60_000);
  },
);

test.serial(
  'killed after recording a reply but before answering it: the hook retries, the duplicate is acknowledged, the Revision released',
  async (t) => {
    const gate = await start('after-reply-recorded');
    await env.createRevision('reply-00001', { annotations: { crash: 'yes' } });
    const req = await waitFor(requestFor('reply-00001'), { timeoutMs: 60_000, what: 'the request' });
    const first = await asyncReply(req, 'succeeded').then(
      (r) => r.status,
      (e: unknown) => `connection failed: ${String(e)}`,
    );
    t.regex(String(first), /connection failed/, 'the gate died before it could answer');
    await killedAt(gate, 'after-reply-recorded');
    const run = await env.waitForRun('reply-00001', 'reply stored', (r) => r.status?.hooks?.[0]?.phase === 'Succeeded');
    t.truthy(run, 'the reply was stored before the crash');
    // Held or already released: the leader may see the stored reply (its watch) and release before
    // the write's own answer reaches the recorder and the crash point. Either way nothing is lost.
    await start();
    t.is(await replyUntilAccepted(req), 202, "the hook's retry is acknowledged as a duplicate");
    await env.waitReleased('reply-00001', 60_000);
  },
);

test.serial('killed just before removing the label: the restarted gate releases', async (t) => {
  const gate = await start('before-release');
  await env.createRevision('label-00001', { annotations: { crash: 'yes' } });
  const req = await waitFor(requestFor('label-00001'), { timeoutMs: 60_000, what: 'the request' });
  // The leader reacts to the stored reply at once, so the crash may beat the sink's 202 to the
  // wire: either answer is fine, the reply is stored before the release is attempted.
  const answer = await asyncReply(req, 'succeeded').then(
    (r) => r.status,
    () => 'connection lost',
  );
  t.true(answer === 202 || answer === 'connection lost', `unexpected answer ${answer}`);
  await killedAt(gate, 'before-release');
  await env.waitForRun('label-00001', 'reply stored', (r) => r.status?.hooks?.[0]?.phase === 'Succeeded');
  t.true(isHeld(await env.getRevision('label-00001')), 'still held: the crash came first');
  await start();
  await env.waitReleased('label-00001', 60_000);
  const run = await env.waitForRun('label-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.summary, '1/1');
});
