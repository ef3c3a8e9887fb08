// H3: NATS with accounts, users and per-subject permissions, against a real nats-server (the
// pinned v2.15) and the real control plane. The gate (nkey) and two hooks (A by user/password,
// B by nkey) get exactly the permissions schemas/nats-permissions.ts writes down (and docs/protocol.md
// lists). Each attack is performed by hook A with its own credentials and must be refused by
// the server, while the legit flow still releases Revisions.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { type NatsServer, startNatsServer } from '@knative-prestart/devcluster/nats.ts';
import { accountsConfig, newNkeyUser } from '@knative-prestart/devcluster/nats-auth.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test, { type ExecutionContext } from 'ava';
import { connect, ErrorCode, type NatsConnection, type NatsError } from 'nats';
import { serveHookNats, succeed } from '../../../hooks/index.ts';
import type { NatsSecurity } from '../../../schemas/nats-auth.ts';
import { GATE_REPLIES_DURABLE, hookDurable, hookInboxPrefix, STREAMS } from '../../../schemas/nats-names.ts';
import { gateNatsPermissions, hookNatsPermissions } from '../../../schemas/nats-permissions.ts';
import { ensureDurableConsumer, jetStreamManager } from '../../../transport/nats.ts';
import { natsSecurityOptions } from '../../../transport/nats-auth.ts';

const REQ = STREAMS.requests.name;
const REP = STREAMS.replies.name;

let env: GateEnv;
let nats: NatsServer;
let hookA: string;
let hookB: string;
let asA: NatsSecurity;
let asB: NatsSecurity;
let asGate: NatsSecurity;
const opened: NatsConnection[] = [];

test.before(async () => {
  env = await gateEnv('natsauth', { inProcess: false });
  hookA = `${env.instance}-a`;
  hookB = `${env.instance}-b`;
  const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-auth-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text, { mode: 0o600 });
    return path;
  };
  const gate = newNkeyUser();
  const b = newNkeyUser();
  nats = await startNatsServer({
    config: accountsConfig({
      PRESTART: [
        { nkey: gate.publicKey, permissions: gateNatsPermissions() },
        { user: 'hook-a', password: 'a-password', permissions: hookNatsPermissions(hookA) },
        { nkey: b.publicKey, permissions: hookNatsPermissions(hookB) },
      ],
    }),
  });
  asGate = { nkeyFile: file('gate.nk', `${gate.seed}\n`) };
  asA = { user: 'hook-a', passwordFile: file('a.password', 'a-password\n') };
  asB = { nkeyFile: file('b.nk', b.seed) };
  await env.startGate({ nats: { servers: nats.url, security: asGate } });
});

test.after.always(async () => {
  for (const nc of opened) await nc.close().catch(() => undefined);
  await env?.stop();
  await nats?.stop();
});

/** A raw connection as the identity `who`, with the inbox prefix that identity is granted. */
async function connectAs(who: NatsSecurity, inboxPrefix: string): Promise<NatsConnection> {
  const nc = await connect({ servers: nats.url, ...natsSecurityOptions(who, inboxPrefix) });
  opened.push(nc);
  return nc;
}

const inboxOf = (hook: string) => hookInboxPrefix(hookDurable(hook));

/** The server answers with a permissions violation: the message never reached JetStream. */
async function denied(t: ExecutionContext, nc: NatsConnection, subject: string, body: unknown = ''): Promise<void> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  const err = await t.throwsAsync(nc.request(subject, payload, { timeout: 10_000 }), undefined, subject);
  t.is((err as NatsError | undefined)?.code, ErrorCode.PermissionsViolation, `${subject}: ${err?.message}`);
}

/** The server refuses the subscription (it closes at once; our own inbox stays open). */
async function cannotSubscribe(t: ExecutionContext, nc: NatsConnection, subject: string): Promise<void> {
  const sub = nc.subscribe(subject);
  // The server answers SUB before the PONG of this flush: a refused subscription is closed by then.
  await nc.flush();
  t.true(sub.isClosed(), `subscribing to ${subject} was refused`);
}

function natsHook(name: string, match: string) {
  return env.createHook(name, { match: env.annotationMatch(match), resendInterval: '1m', delivery: { transport: 'nats' } });
}

async function pendingFor(nc: NatsConnection, durable: string): Promise<number> {
  return (await (await jetStreamManager(nc)).consumers.info(REQ, durable)).num_pending;
}

test.serial('an unauthenticated client, a wrong password and an unknown nkey are refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-intruder-'));
  writeFileSync(join(dir, 'guess'), 'guess');
  writeFileSync(join(dir, 'stranger.nk'), newNkeyUser().seed);
  const intruders: Array<[string, NatsSecurity]> = [
    ['no credentials', {}],
    ['a wrong password', { user: 'hook-a', passwordFile: join(dir, 'guess') }],
    ['an unknown nkey', { nkeyFile: join(dir, 'stranger.nk') }],
  ];
  for (const [what, security] of intruders) {
    const err = await t.throwsAsync(connect({ servers: nats.url, ...natsSecurityOptions(security, '_INBOX') }));
    t.is((err as NatsError | undefined)?.code, ErrorCode.AuthorizationViolation, what);
  }
});

test.serial(
  'the gate and a hook, each with its own credentials: the request goes out, the reply comes in, the Revision is released',
  async (t) => {
    const hook = await serveHookNats({ name: hookA, servers: nats.url, security: asA, handler: async () => succeed('done by A') });
    t.teardown(() => hook.stop());
    await natsHook(hookA, 'natsa');
    await env.waitUntilStamped(hookA, { natsa: 'yes' });
    await env.createRevision('natsa-00001', { annotations: { natsa: 'yes' } });
    await env.waitReleased('natsa-00001');
    t.is((await env.waitForRun('natsa-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.hooks?.[0]?.message, 'done by A');
  },
);

test.serial("hook A cannot read hook B's requests, by any road; B still gets its request and the Revision is released", async (t) => {
  // B's durable exists (made with B's own credentials) and holds B's request, unread.
  const b = await connectAs(asB, inboxOf(hookB));
  const durableB = hookDurable(hookB);
  await ensureDurableConsumer(await jetStreamManager(b), REQ, {
    durable: durableB,
    filterSubject: `prestart.requests.${hookB}`,
    ackWaitMs: 30_000,
  });
  await natsHook(hookB, 'natsb');
  await env.waitUntilStamped(hookB, { natsb: 'yes' });
  await env.createRevision('natsb-00001', { annotations: { natsb: 'yes' } });
  await waitFor(async () => (await pendingFor(b, durableB)) === 1, { what: "B's request in B's durable", timeoutMs: 30_000 });

  const a = await connectAs(asA, inboxOf(hookA));
  const ownDurable = hookDurable(hookA);
  // Plain subscriptions: the subject, every request, anyone's inbox (pulled messages go there).
  await cannotSubscribe(t, a, `prestart.requests.${hookB}`);
  await cannotSubscribe(t, a, 'prestart.requests.>');
  await cannotSubscribe(t, a, '>');
  await cannotSubscribe(t, a, '_INBOX.>');
  await cannotSubscribe(t, a, `${inboxOf(hookB)}.>`);
  const own = a.subscribe(`${inboxOf(hookA)}.probe`);
  await a.flush();
  t.false(own.isClosed(), 'its own inbox is allowed');

  // A consumer of its own that reads B's subject: through any other create subject, refused by
  // the permissions; through its own, refused by the server because the filter differs.
  const config = (filter: Record<string, unknown>) => ({
    stream_name: REQ,
    config: { durable_name: ownDurable, ack_policy: 'explicit', ...filter },
  });
  await denied(
    t,
    a,
    `$JS.API.CONSUMER.CREATE.${REQ}.${ownDurable}.prestart.requests.${hookB}`,
    config({ filter_subject: `prestart.requests.${hookB}` }),
  );
  await denied(t, a, `$JS.API.CONSUMER.CREATE.${REQ}.${ownDurable}.prestart.requests.>`, config({ filter_subject: 'prestart.requests.>' }));
  await denied(t, a, `$JS.API.CONSUMER.CREATE.${REQ}.${ownDurable}`, config({}));
  await denied(t, a, `$JS.API.CONSUMER.CREATE.${REQ}`, { stream_name: REQ, config: { ack_policy: 'explicit' } });
  await denied(t, a, `$JS.API.CONSUMER.DURABLE.CREATE.${REQ}.${ownDurable}`, config({ filter_subject: `prestart.requests.${hookB}` }));
  await denied(t, a, `$JS.API.CONSUMER.CREATE.${REQ}.${durableB}.prestart.requests.${hookB}`, {
    stream_name: REQ,
    config: { durable_name: durableB, ack_policy: 'explicit', filter_subject: `prestart.requests.${hookB}` },
  });
  const ownSubject = `$JS.API.CONSUMER.CREATE.${REQ}.${ownDurable}.prestart.requests.${hookA}`;
  // 10131: "did not match filtered subject from create subject"; 10137: several filters need the other API.
  for (const filter of [
    { filter_subject: `prestart.requests.${hookB}` },
    { filter_subjects: [`prestart.requests.${hookB}`] },
    { filter_subject: '>' },
    {},
  ]) {
    const answer = JSON.parse(
      new TextDecoder().decode((await a.request(ownSubject, JSON.stringify(config(filter)), { timeout: 10_000 })).data),
    );
    t.true(
      [10131, 10137].includes(answer.error?.err_code),
      `its own create subject with ${JSON.stringify(filter)}: ${JSON.stringify(answer.error)}`,
    );
  }
  // Reading B's durable, or any message of the stream directly.
  await denied(t, a, `$JS.API.CONSUMER.MSG.NEXT.${REQ}.${durableB}`, { batch: 1 });
  await denied(t, a, `$JS.API.CONSUMER.INFO.${REQ}.${durableB}`);
  await denied(t, a, `$JS.API.STREAM.MSG.GET.${REQ}`, { seq: 1 });
  await denied(t, a, `$JS.API.DIRECT.GET.${REQ}`, { seq: 1 });
  await denied(t, a, `$JS.API.STREAM.INFO.${REQ}`, { subjects_filter: '>' });
  // A stream of its own that copies the requests.
  await denied(t, a, '$JS.API.STREAM.CREATE.COPY', { name: 'COPY', sources: [{ name: REQ }] });
  await denied(t, a, '$JS.API.STREAM.CREATE.COPY', { name: 'COPY', mirror: { name: REQ } });

  t.is(await pendingFor(b, durableB), 1, "B's request is still there, unread by anyone");
  t.true(isHeld(await env.getRevision('natsb-00001')));
  const hook = await serveHookNats({ name: hookB, servers: nats.url, security: asB, handler: async () => succeed('done by B') });
  t.teardown(() => hook.stop());
  await env.waitReleased('natsb-00001');
  t.is((await env.waitForRun('natsb-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.hooks?.[0]?.message, 'done by B');
});

test.serial('a hook cannot publish requests, nor replies in the name of another hook', async (t) => {
  const a = await connectAs(asA, inboxOf(hookA));
  const gate = await connectAs(asGate, '_INBOX.prestart-gate');
  const before = (await (await jetStreamManager(gate)).streams.info(REQ)).state.messages;
  const js = a.jetstream();
  for (const subject of [`prestart.requests.${hookA}`, `prestart.requests.${hookB}`, `prestart.replies.${hookB}`]) {
    const err = await t.throwsAsync(js.publish(subject, 'forged', { timeout: 10_000 }), undefined, subject);
    t.is((err as NatsError | undefined)?.code, ErrorCode.PermissionsViolation, `publishing on ${subject}: ${err?.message}`);
  }
  // A plain publish gets no answer at all; the stream shows it was dropped.
  a.publish(`prestart.requests.${hookB}`, 'forged');
  await a.flush();
  t.is((await (await jetStreamManager(gate)).streams.info(REQ)).state.messages, before, 'no request was added');
});

test.serial("a hook cannot delete, purge or change the streams, nor delete the gate's or another hook's consumer", async (t) => {
  const a = await connectAs(asA, inboxOf(hookA));
  const gate = await connectAs(asGate, '_INBOX.prestart-gate');
  const jsm = await jetStreamManager(gate);
  const before = await Promise.all([jsm.streams.info(REQ), jsm.streams.info(REP)]);
  for (const stream of [REQ, REP]) {
    await denied(t, a, `$JS.API.STREAM.DELETE.${stream}`);
    await denied(t, a, `$JS.API.STREAM.PURGE.${stream}`, {});
    await denied(t, a, `$JS.API.STREAM.UPDATE.${stream}`, { name: stream, subjects: ['elsewhere.>'], max_age: 1 });
    await denied(t, a, `$JS.API.STREAM.MSG.DELETE.${stream}`, { seq: 1 });
  }
  await denied(t, a, `$JS.API.CONSUMER.DELETE.${REP}.${GATE_REPLIES_DURABLE}`);
  await denied(t, a, `$JS.API.CONSUMER.DELETE.${REQ}.${hookDurable(hookB)}`);
  await denied(t, a, `$JS.API.CONSUMER.CREATE.${REP}.${GATE_REPLIES_DURABLE}.prestart.replies.>`, {
    stream_name: REP,
    config: { durable_name: GATE_REPLIES_DURABLE, ack_policy: 'none', filter_subject: 'prestart.replies.>' },
  });
  await denied(t, a, `$JS.API.CONSUMER.MSG.NEXT.${REP}.${GATE_REPLIES_DURABLE}`, { batch: 1 });
  const after = await Promise.all([jsm.streams.info(REQ), jsm.streams.info(REP)]);
  t.deepEqual(
    after.map((s) => [s.config.subjects, s.config.max_age, s.state.messages >= 1]),
    before.map((s) => [s.config.subjects, s.config.max_age, true]),
    'both streams as they were, messages kept',
  );
  t.is((await jsm.consumers.info(REP, GATE_REPLIES_DURABLE)).config.filter_subject, 'prestart.replies.>');
  // The gate may not look at a hook's consumer either: B checks its own.
  const b = await connectAs(asB, inboxOf(hookB));
  t.truthy(await (await jetStreamManager(b)).consumers.info(REQ, hookDurable(hookB)), "B's durable is still there");
});

test.serial('docs/protocol.md lists exactly the permissions enforced here', (t) => {
  const doc = readFileSync(new URL('../../../docs/protocol.md', import.meta.url), 'utf8');
  for (const subject of [...Object.values(gateNatsPermissions()).flat(), ...Object.values(hookNatsPermissions('<hook>')).flat()]) {
    t.true(doc.includes(`\`${subject}\``), `docs/protocol.md names ${subject}`);
  }
});
