// The gate with the NATS JetStream transport against a real nats-server and the real control
// plane: requests go out on the stream, the hook (the project's SDK) answers on the replies
// stream, the Revision is released; a gate killed between storing a reply and acking it loses
// nothing because JetStream redelivers the unacked reply to the restarted gate.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type GateProcess, spawnGate } from '@knative-prestart/devcluster/gate/process.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { type NatsServer, startNatsServer } from '@knative-prestart/devcluster/nats.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { type NatsHookService, serveHookNats, succeed } from '../../../hooks/index.ts';

// Gates share the durable reply consumer (replicas split the work), so each scenario stops its
// gates before the next starts (t.teardown runs in reverse order when the test ends).
let nats: NatsServer;
const cleanups: Array<() => Promise<unknown>> = [];

test.before(async () => {
  nats = await startNatsServer();
});

test.after.always(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  await nats?.stop();
});

function natsHook(env: GateEnv, name: string, match: string) {
  return env.createHook(name, {
    match: env.annotationMatch(match),
    resendInterval: '1m',
    delivery: { transport: 'nats' },
  });
}

test.serial('a request over JetStream is answered over JetStream and releases the Revision', async (t) => {
  const env = await gateEnv('nats', { nats: nats.url });
  t.teardown(() => env.stop());
  const name = `${env.instance}-db`;
  let release!: () => void;
  const proceed = new Promise<void>((resolve) => {
    release = resolve;
  });
  const seen: string[] = [];
  const hook: NatsHookService = await serveHookNats({
    name,
    servers: nats.url,
    handler: async (req) => {
      seen.push(req.revision.name);
      await proceed;
      return succeed('provisioned over NATS');
    },
  });
  t.teardown(() => hook.stop());
  await natsHook(env, name, 'nats');
  await env.waitUntilStamped(name, { nats: 'yes' });

  await env.createRevision('nats-00001', { annotations: { nats: 'yes' } });
  await waitFor(() => seen.includes('nats-00001'), { timeoutMs: 30_000, what: 'the hook to get the request from JetStream' });
  t.true(isHeld(await env.getRevision('nats-00001')), 'held while the hook works');
  release();
  await env.waitReleased('nats-00001');
  const run = await env.waitForRun('nats-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.hooks?.[0]?.message, 'provisioned over NATS');
});

test.serial('a gate killed after storing a JetStream reply but before acking it loses nothing', async (t) => {
  const env = await gateEnv('natscrash', { inProcess: false });
  cleanups.push(() => env.stop());
  const name = `${env.instance}-db`;
  const [webhook, sink] = await freePorts(2);
  const ports = { webhook: webhook as number, sink: sink as number };
  const hook = await serveHookNats({ name, servers: nats.url, handler: async () => succeed('done') });
  cleanups.push(() => hook.stop());
  await natsHook(env, name, 'natscrash');

  const doomed: GateProcess = await spawnGate(env, ports, 'after-reply-recorded', nats.url);
  cleanups.push(() => doomed.stop());
  await env.waitUntilStamped(name, { natscrash: 'yes' });
  await env.createRevision('natscrash-00001', { annotations: { natscrash: 'yes' } });
  const { signal } = await doomed.exited;
  t.is(signal, 'SIGKILL', 'the gate died at the crash point');
  await env.waitForRun('natscrash-00001', 'reply stored', (r) => r.status?.hooks?.[0]?.phase === 'Succeeded');
  // Held or already released: the gate's watch may see the stored reply and release before the
  // write's own answer reaches the crash point. Either way the reply is kept, and the ack is not.

  const restarted = await spawnGate(env, ports, undefined, nats.url);
  cleanups.push(() => restarted.stop());
  await env.waitReleased('natscrash-00001', 90_000);
  t.is((await env.waitForRun('natscrash-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.summary, '1/1');
});
