// Faults around a hook's deadline, with the gate as its own process (the CLI): a kill -9 right
// after an Ignore hook's timeout released the Revision, and an outage longer than a hook's
// timeout while the hook finished its work. Neither may leave a run stuck or throw away an
// answer the hook still has.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { type GatePorts, type GateProcess, spawnGate } from '@knative-prestart/devcluster/gate/process.ts';
import { asyncReply, syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';

let env: GateEnv;
let ports: GatePorts;
let hook: HookServer;
/** Requests (by CloudEvent id) whose work the hook has finished: a repeat is answered from memory, at once. */
const finished = new Set<string>();
const running: GateProcess[] = [];

test.before(async () => {
  env = await gateEnv('outage', { inProcess: false });
  const [webhook, sink] = await freePorts(2);
  ports = { webhook: webhook as number, sink: sink as number };
  hook = await startHookServer(async (req) => (finished.has(req.ceId) ? syncReply(req, 'succeeded') : { status: 202 }));
});

test.afterEach.always(async () => {
  await Promise.all(running.splice(0).map((g) => g.stop()));
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
});

async function start(crashAt?: string): Promise<GateProcess> {
  const gate = await spawnGate(env, ports, crashAt);
  running.push(gate);
  return gate;
}

const requestFor = (revision: string) => () => hook.requests.find((r) => r.data.revision.name === revision && r.data.action === 'start');

test.serial('killed right after an Ignore hook timed out and the Revision was released: the restarted gate finishes the run', async (t) => {
  const hookName = `${env.instance}-optional`;
  await env.createHook(hookName, {
    match: env.annotationMatch('optional'),
    failurePolicy: 'Ignore',
    timeout: '3s',
    resendInterval: '3s',
    delivery: { transport: 'http', url: hook.url },
  });
  const gate = await start('after-release');
  await env.waitUntilStamped(hookName, { optional: 'yes' });
  await env.createRevision('opt-00001', { annotations: { optional: 'yes' } });
  await waitFor(requestFor('opt-00001'), { timeoutMs: 60_000, what: 'the request' });

  const { signal } = await gate.exited;
  t.is(signal, 'SIGKILL', `the gate died at after-release:\n${gate.output()}`);
  t.false(isHeld(await env.getRevision('opt-00001')), 'the release went through before the crash');
  const stranded = await env.getRun('opt-00001');
  t.is(stranded?.status?.phase, 'Running', 'the status recording the timeout was never written');
  t.is(stranded?.status?.hooks?.[0]?.phase, 'Requested');

  await start();
  const run = await env.waitForRun('opt-00001', 'Released', (r) => r.status?.phase === 'Released', 60_000);
  t.like(run.status?.hooks?.[0], { phase: 'TimedOut', message: 'no reply within 3s' });
  t.regex(run.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /ignored \(failurePolicy Ignore\): hook .* timed out/);
});

test.serial(
  'a gate outage longer than the timeout: the hook that finished meanwhile is asked again and releases, not TimedOut',
  async (t) => {
    const hookName = `${env.instance}-scan`;
    await env.createHook(hookName, {
      match: env.annotationMatch('scan'),
      timeout: '6s',
      resendInterval: '2s',
      delivery: { transport: 'http', url: hook.url },
    });
    const gate = await start();
    await env.waitUntilStamped(hookName, { scan: 'yes' });
    await env.createRevision('scan-00001', { annotations: { scan: 'yes' } });
    const req: ReceivedRequest = await waitFor(requestFor('scan-00001'), { timeoutMs: 60_000, what: 'the request' });
    const requested = await env.waitForRun('scan-00001', 'Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
    const deadline = Date.parse(requested.status?.hooks?.[0]?.deadline ?? '');

    await gate.stop();
    // The hook finishes while no gate runs: its reply cannot be delivered.
    finished.add(req.ceId);
    const lost = await asyncReply(req, 'succeeded').then(
      (r) => `answered ${r.status}`,
      () => 'lost',
    );
    t.is(lost, 'lost', 'nobody took the reply');
    await waitFor(() => Date.now() > deadline + 1_000, { timeoutMs: 30_000, what: "the hook's deadline to pass while the gate is down" });
    t.true(isHeld(await env.getRevision('scan-00001')));

    await start();
    const run = await env.waitForRun('scan-00001', 'Released', (r) => r.status?.phase === 'Released', 60_000);
    t.like(run.status?.hooks?.[0], { phase: 'Succeeded', attempt: 1 });
    t.true(Date.parse(run.status?.hooks?.[0]?.deadline ?? '') > deadline, 'the deadline moved by the grace period');
    await env.waitReleased('scan-00001', 30_000);
    const again = hook.requests.filter((r) => r.ceId === req.ceId && Date.parse(String(r.headers['ce-time'])) > deadline);
    t.true(again.length >= 1, 'asked once more after the restart, with the same request id');
  },
);
