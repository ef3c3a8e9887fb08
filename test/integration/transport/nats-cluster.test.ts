// The gate's NATS transport and sink on a real three-node JetStream cluster: streams left with one
// copy by an older gate (or made by hand) are brought to three when the gate starts, its durable
// with them, and a server list whose first server is down still connects.

import { startNatsCluster } from '@knative-prestart/devcluster/nats-cluster.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { AckPolicy, connect } from 'nats';
import pino from 'pino';
import { createNatsTransport } from '../../../emitter/nats.ts';
import { createNatsSink } from '../../../sinks/nats.ts';
import { GATE_REPLIES_DURABLE, natsServerList, STREAMS } from '../../../transport/nats.ts';
import { recordingOnReply, requestEvent } from '../../support/events.ts';
import { keys } from '../../support/keys.ts';

const silent = pino({ level: 'silent' });

test('R1 streams and a durable pinned to R1 are brought to three copies; a durable that follows its stream scales with it', async (t) => {
  const cluster = await startNatsCluster();
  t.teardown(() => cluster.stop());
  const nc = await connect({ servers: natsServerList(cluster.servers) });
  t.teardown(() => nc.close());
  const jsm = await nc.jetstreamManager();
  // What a gate of the previous release left: both streams R1 (it never set replicas), a message kept.
  for (const s of [STREAMS.requests, STREAMS.replies])
    await jsm.streams.add({ name: s.name, subjects: [`${s.subjectPrefix}.>`], num_replicas: 1 });
  await nc.jetstream().publish(`${STREAMS.requests.subjectPrefix}.db`, new TextEncoder().encode('kept'));
  await jsm.consumers.add(STREAMS.replies.name, {
    durable_name: GATE_REPLIES_DURABLE,
    ack_policy: AckPolicy.Explicit,
    filter_subject: `${STREAMS.replies.subjectPrefix}.>`,
    num_replicas: 1,
  });
  await jsm.consumers.add(STREAMS.requests.name, {
    durable_name: 'prestart-hook-db',
    ack_policy: AckPolicy.Explicit,
    filter_subject: 'prestart.requests.db',
  });

  // The first server of the list is a closed port: the client goes on to the next.
  const [closed] = await freePorts(1);
  const servers = `nats://127.0.0.1:${closed},${cluster.servers}`;
  const transport = createNatsTransport({ servers, logger: silent });
  t.teardown(() => transport.close());
  const sink = createNatsSink({ keys, servers, logger: silent, onReply: recordingOnReply().onReply });
  t.teardown(() => sink.stop());
  await transport.ready();
  await sink.start();

  for (const s of [STREAMS.requests.name, STREAMS.replies.name]) {
    t.is((await jsm.streams.info(s)).config.num_replicas, 3, `${s} now has three copies`);
    await waitFor(
      async () => {
        const view = await cluster.streamCluster(s);
        return view?.replicas.length === 2 && view.replicas.every((r) => r.current);
      },
      { what: `both new copies of ${s} to catch up` },
    );
  }
  t.is((await jsm.streams.info(STREAMS.requests.name)).state.messages, 1, 'what the stream held is kept');
  // A leader and two replicas each; the scale-up of a consumer, too, is carried out after its update returns.
  const onThreeNodes = (stream: string, durable: string) => async () =>
    (await jsm.consumers.info(stream, durable)).cluster?.replicas?.length === 2;
  await waitFor(onThreeNodes(STREAMS.replies.name, GATE_REPLIES_DURABLE), { what: "the gate's durable on three nodes" });
  await waitFor(onThreeNodes(STREAMS.requests.name, 'prestart-hook-db'), { what: "the hook's durable to follow its stream" });
  t.is((await jsm.consumers.info(STREAMS.replies.name, GATE_REPLIES_DURABLE)).config.num_replicas, 3);

  // And it is the stream the gate sends on.
  t.deepEqual(await transport.send(requestEvent({ hook: 'db' }), { transport: 'nats' }, 'db'), { type: 'accepted' });
});
