// Two live replicas of one gate, as a Deployment with replicas: 2 runs them: one leads (its
// controller sends and releases), the other only serves. When the leader is killed (-9), the
// other takes the Lease once it expires, re-sends the unanswered request with the same
// CloudEvent id, takes the hook's reply and releases the Revision. Both replicas are the CLI in
// processes of their own.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { type GateProcess, spawnGate } from '@knative-prestart/devcluster/gate/process.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoordinationV1Api } from '@kubernetes/client-node';
import test from 'ava';

let env: GateEnv;
let hook: HookServer;
let hookName: string;
const replicas: GateProcess[] = [];

test.before(async () => {
  env = await gateEnv('failover', { inProcess: false });
  hook = await startHookServer(async () => ({ status: 202 }));
  hookName = `${env.instance}-db`;
  await env.createHook(hookName, {
    match: env.annotationMatch('failover'),
    resendInterval: '2s',
    delivery: { transport: 'http', url: hook.url },
  });
});

test.after.always(async () => {
  await Promise.all(replicas.map((g) => g.stop()));
  await hook?.close();
  await env?.stop();
});

async function leaseHolder(): Promise<string | undefined> {
  const lease = await env.cluster.kubeConfig
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ name: `knative-prestart-gate-${env.instance}`, namespace: 'knative-prestart' })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity ?? undefined;
}

test.serial(
  'the leader is killed while a Revision is held: the other replica takes over, re-sends, and releases on the reply',
  async (t) => {
    const [webhookA, sinkA, webhookB, sinkB] = (await freePorts(4)) as [number, number, number, number];
    const first = await spawnGate(env, { webhook: webhookA, sink: sinkA });
    replicas.push(first);
    const leader = await waitFor(leaseHolder, { timeoutMs: 30_000, what: 'the first replica to take the Lease' });
    // The second replica serves admission (it registered its URL last) and waits for the Lease.
    const second = await spawnGate(env, { webhook: webhookB, sink: sinkB });
    replicas.push(second);
    t.is(await leaseHolder(), leader, 'the first replica keeps leading while it lives');

    await env.createRevision('fo-00001', { annotations: { failover: 'yes' } });
    const sent = await waitFor(() => hook.requests.find((r) => r.data.revision.name === 'fo-00001'), {
      timeoutMs: 30_000,
      what: 'the request',
    });
    t.is(sent.data.replyTo, `http://127.0.0.1:${sinkA}/events`, 'the leader sent it');

    first.child.kill('SIGKILL');
    await first.exited;
    t.true(isHeld(await env.getRevision('fo-00001')), 'still held with the leader gone');
    const successor = await waitFor(async () => ((await leaseHolder()) !== leader ? leaseHolder() : undefined), {
      timeoutMs: 30_000,
      what: 'the second replica to take the Lease',
    });
    t.not(successor, leader);

    // The new leader re-sends the unanswered request: the same CloudEvent, replies to itself.
    const resent = await waitFor(() => hook.requests.find((r) => r.ceId === sent.ceId && r.data.replyTo?.includes(`:${sinkB}/`)), {
      timeoutMs: 30_000,
      what: 'the new leader to re-send the request',
    });
    t.is(resent.data.attempt, sent.data.attempt);
    const answer = await asyncReply(resent, 'succeeded');
    t.is(answer.status, 202);
    await env.waitReleased('fo-00001');
    t.is((await env.waitForRun('fo-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.phase, 'Released');
  },
);
