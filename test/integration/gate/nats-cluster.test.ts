// The gate with NATS delivery against a real three-node JetStream cluster (three nats-server
// processes with routes), its hook on the SDK, both given the server list as one comma-separated
// string (--nats, NATS_URL). In the middle of a burst of 200 Revisions the node leading
// PRESTART_REPLIES is killed with SIGKILL: every Revision must be released exactly once, none
// before its hook answered, and no reply lost.
//
// The killed node is started again once a request answered after the kill had its reply applied:
// a lost pod comes back on its volume, and the test then also shows it catching up with no
// Revision released twice. The recovery itself happens on the two nodes left, before the restart,
// so its figure is that of a cluster running one node short, as it would be until the pod is back.

import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { watchCollection } from '@knative-prestart/devcluster/knative-client.ts';
import { startNatsCluster } from '@knative-prestart/devcluster/nats-cluster.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { connect } from 'nats';
import pino from 'pino';
import { type RevisionObject, RUNS, type RunObject } from '../../../api/resources.ts';
import { serveHookNats, succeed } from '../../../hooks/index.ts';
import { natsServerList, STREAMS } from '../../../transport/nats.ts';

const BURST = 200;
/** Revisions created at once: the apiserver and the webhook share 2 cores with three nats-servers. */
const CREATE_CONCURRENCY = 8;

test('a JetStream node killed mid-burst: 200 Revisions released once each, none early, no reply lost', async (t) => {
  // Start, a 200-Revision burst and a failover on 2 shared cores take more than the suite's 2 min.
  t.timeout(240_000);
  const cluster = await startNatsCluster();
  t.teardown(() => cluster.stop());
  const env = await gateEnv('natsr3', { nats: cluster.servers });
  t.teardown(() => env.stop());
  const name = `${env.instance}-db`;

  // When the hook answered each Revision (epoch ms), taken as its handler returns, before the reply is published.
  const answered = new Map<string, number>();
  const hook = await serveHookNats({
    name,
    logger: pino({ level: 'warn' }),
    servers: cluster.servers,
    handler: async (req) => {
      // The first answer bounds the release; a redelivered request answered again does not move it.
      if (!answered.has(req.revision.name)) answered.set(req.revision.name, Date.now());
      return succeed('ok');
    },
  });
  t.teardown(() => hook.stop());
  // A request that could not be stored during the election is sent again after resendInterval.
  await env.createHook(name, { match: env.annotationMatch('r3'), resendInterval: '5s', delivery: { transport: 'nats' } });
  await env.waitUntilStamped(name, { r3: 'yes' });
  t.deepEqual(
    await Promise.all([STREAMS.requests.name, STREAMS.replies.name].map(async (s) => (await cluster.streamCluster(s))?.replicas.length)),
    [2, 2],
    'both streams have three copies (a leader and two replicas), the default on a clustered server',
  );

  const revisions = await watchCollection<RevisionObject>(env.admin, `/apis/serving.knative.dev/v1/namespaces/${env.namespace}/revisions`);
  t.teardown(() => revisions.stop());
  const names = Array.from({ length: BURST }, (_, i) => `r3-${String(i + 1).padStart(5, '0')}`);
  const queue = [...names];
  const creating = Promise.all(
    Array.from({ length: CREATE_CONCURRENCY }, async () => {
      for (let n = queue.shift(); n !== undefined; n = queue.shift()) await env.createRevision(n, { annotations: { r3: 'yes' } });
    }),
  );
  // Awaited after the kill; a failed create must not count as an unhandled rejection meanwhile.
  creating.catch(() => undefined);

  // Mid-burst: half the hooks answered, Revisions still being created.
  await waitFor(() => answered.size >= BURST / 2, { timeoutMs: 120_000, what: `the hook to answer ${BURST / 2} Revisions` });
  const leader = await waitFor(() => cluster.streamLeader(STREAMS.replies.name), { what: 'the replies stream leader' });
  const requestsLeader = await cluster.streamLeader(STREAMS.requests.name);
  const killedAt = Date.now();
  await cluster.kill(leader);
  t.log(
    `killed ${leader} (leader of ${STREAMS.replies.name}; ${STREAMS.requests.name} led by ${requestsLeader}) after ${answered.size} answers`,
  );

  // One LIST per look, not 200 GETs: the apiserver is shared with the gate under test.
  const runs = async (): Promise<RunObject[]> =>
    ((await env.custom.listNamespacedCustomObject({ ...RUNS, namespace: env.namespace })) as { items: RunObject[] }).items;
  // A reply the hook sent before the kill may still be applied after it; recovery is the whole
  // road working again: a request stored, answered by the hook and its reply applied, all after the kill.
  const appliedAfterKill = (r: RunObject, hookAnsweredAfter: boolean) => {
    const at = Date.parse(r.status?.hooks?.[0]?.answeredAt ?? '');
    const hookAt = answered.get(r.metadata?.name ?? '') ?? 0;
    return at > killedAt && (!hookAnsweredAfter || hookAt > killedAt) ? at : undefined;
  };
  const firstAppliedAfter = async (hookAnsweredAfter: boolean) => {
    const after = (await runs()).map((r) => appliedAfterKill(r, hookAnsweredAfter)).filter((x): x is number => x !== undefined);
    return after.length > 0 ? Math.min(...after) : undefined;
  };
  const firstApplied = await waitFor(() => firstAppliedAfter(true), {
    timeoutMs: 90_000,
    what: 'a request answered and its reply applied after the kill',
  });
  const firstAppliedAny = (await firstAppliedAfter(false)) ?? firstApplied;
  await cluster.restart(leader);
  await creating;

  const released = await waitFor(
    async () => {
      const all = await runs();
      return all.length === BURST && all.every((r) => r.status?.phase === 'Released') ? all : undefined;
    },
    { timeoutMs: 150_000, what: `all ${BURST} PrestartRuns Released` },
  );
  for (const n of names) t.false(isHeld(await env.getRevision(n)), `${n} released`);

  // Exactly once: per Revision, the watch saw the hold go away once and never come back.
  await waitFor(() => names.every((n) => holdStates(revisions.seen, n).at(-1) === false), {
    what: 'the watch to see every release',
  });
  const releasedSeenAt = new Map<string, number>();
  for (const n of names) {
    const states = holdStates(revisions.seen, n);
    const releases = states.filter((held, i) => i > 0 && states[i - 1] && !held).length;
    const reholds = states.filter((held, i) => i > 0 && !states[i - 1] && held).length;
    t.true(states[0] === true && releases === 1 && reholds === 0, `${n}: admitted held, released once (${JSON.stringify(states)})`);
  }
  for (const s of revisions.seen) {
    const n = s.object.metadata?.name ?? '';
    if (!isHeld(s.object) && !releasedSeenAt.has(n)) releasedSeenAt.set(n, performance.timeOrigin + s.at);
  }

  // None early: each release (the run's releasedAt, and the watch's sighting) after its hook answered.
  const early = released.filter((r) => {
    const n = r.metadata?.name ?? '';
    const hookAt = answered.get(n);
    const releasedAt = Date.parse(r.status?.releasedAt ?? '');
    return hookAt === undefined || !(releasedAt >= hookAt) || !((releasedSeenAt.get(n) ?? 0) >= hookAt);
  });
  t.deepEqual(
    early.map((r) => r.metadata?.name),
    [],
    'no Revision released before its hook answered',
  );
  t.true(
    released.every((r) => r.status?.hooks?.[0]?.phase === 'Succeeded' && r.status?.summary === '1/1'),
    'every reply recorded',
  );

  // The timeline around the kill, in 2.5 s steps (-1: the 2.5 s before it): the gap is JetStream's election.
  const perStep = (xs: number[]) => {
    const steps = new Map<number, number>();
    for (const x of xs) steps.set(Math.floor((x - killedAt) / 2_500), (steps.get(Math.floor((x - killedAt) / 2_500)) ?? 0) + 1);
    return [...steps.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([step, n]) => `${step}:${n}`)
      .join(' ');
  };
  t.log(`hook answers per step: ${perStep([...answered.values()])}`);
  t.log(`replies applied per step: ${perStep(released.map((r) => Date.parse(r.status?.hooks?.[0]?.answeredAt ?? '')))}`);
  const lastReleased = Math.max(...released.map((r) => Date.parse(r.status?.releasedAt ?? '')));
  // The restarted node caught up: every replica of both streams current again.
  await waitFor(
    async () => {
      const views = await Promise.all([STREAMS.requests.name, STREAMS.replies.name].map((s) => cluster.streamCluster(s)));
      return views.every((v) => v?.leader !== undefined && v.replicas.length === 2 && v.replicas.every((r) => r.current));
    },
    { timeoutMs: 60_000, what: `${leader} to catch up on both streams` },
  );
  // What one message weighs in the streams, for the sizing in docs/operations.md.
  const nc = await connect({ servers: natsServerList(cluster.servers) });
  const jsm = await nc.jetstreamManager();
  for (const s of [STREAMS.requests.name, STREAMS.replies.name]) {
    const { state } = await jsm.streams.info(s);
    t.log(`${s}: ${state.messages} messages, ${Math.round(state.bytes / state.messages)} bytes each (one copy)`);
  }
  await nc.close();
  t.log(
    `recovery: first reply applied ${firstAppliedAny - killedAt} ms after the SIGKILL; first request answered and its reply applied after it: ${firstApplied - killedAt} ms; last of ${BURST} Revisions released ${lastReleased - killedAt} ms after it`,
  );
});

/** The hold label of Revision `name` in each watch sighting, repeats folded. */
function holdStates(seen: { object: { metadata?: { name?: string; labels?: Record<string, string> } } }[], name: string): boolean[] {
  const states: boolean[] = [];
  for (const s of seen) {
    if (s.object.metadata?.name !== name) continue;
    const held = isHeld(s.object);
    if (states.at(-1) !== held) states.push(held);
  }
  return states;
}
