// Rotating the correlation key while a Revision is held, the documented way (docs/protocol.md),
// with no gate restart: the gate follows its Secret, verifies replies signed with the new key as
// soon as it is in the ring, signs with it once it is first, and still takes replies to the
// requests it signed before. The gate runs as its service account, so this also shows that
// config/300-rbac.yaml lets it watch that one Secret.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { CORRELATION_SECRET, keysOf } from '../../../gate/delivery/correlation-keys.ts';
import { buildCompleted, KeyRing, toBinary } from '../../../schemas/index.ts';

const GATE_NAMESPACE = 'knative-prestart';
let env: GateEnv;
let hook: HookServer;

test.before(async () => {
  env = await gateEnv('keyrot');
  hook = await startHookServer(async () => ({ status: 202 }));
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
});

/** Writes the ring (hex keys, the first signs) the way an admin would. */
async function writeKeys(keys: readonly Buffer[]): Promise<void> {
  const value = Buffer.from(keys.map((k) => k.toString('hex')).join(',')).toString('base64');
  await env.core.patchNamespacedSecret({
    name: CORRELATION_SECRET,
    namespace: GATE_NAMESPACE,
    body: [{ op: 'replace', path: '/data/keys', value }],
  });
}

async function post(event: ReturnType<typeof buildCompleted>): Promise<number> {
  const msg = toBinary(event);
  const res = await fetch(env.gate.sinkUrl, { method: 'POST', headers: msg.headers, body: msg.body });
  await res.text();
  return res.status;
}

test('a rotated key is used for new requests and verifies replies without restarting the gate; replies to older requests still count', async (t) => {
  const hookName = `${env.instance}-scan`;
  await env.createHook(hookName, {
    match: env.annotationMatch('rotate', 'yes'),
    timeout: '10m',
    resendInterval: '2s',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { rotate: 'yes' });
  const rev = await env.createRevision('rot-00001', { annotations: { rotate: 'yes' } });
  const before = await waitFor(() => hook.requests[0], { timeoutMs: 30_000, what: 'the first request' });
  const run = await env.waitForRun('rot-00001', 'Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
  const gateInstance = env.gate;

  const old = keysOf(await env.core.readNamespacedSecret({ name: CORRELATION_SECRET, namespace: GATE_NAMESPACE }));
  const [signing] = old;
  if (!signing) throw new Error('no key in the Secret');
  const fresh = Buffer.from(KeyRing.generateKey());
  const onlyFresh = new KeyRing([fresh]);
  t.is(onlyFresh.verify(before.correlationid), undefined, 'the first request was signed with the old key');

  // 1. The new key goes last: every replica verifies with it, none signs with it yet.
  await writeKeys([...old, fresh]);
  const ref = { namespace: env.namespace, revision: 'rot-00001', revisionUID: rev.metadata?.uid ?? '', runUID: run.metadata?.uid ?? '' };
  const progressSignedWithFresh = (n: number) =>
    buildCompleted({
      request: { correlationid: onlyFresh.mint({ ...ref, hook: hookName, attempt: 1 }), hook: hookName, attempt: 1 },
      outcome: 'progress',
      progress: n,
      source: `/test-hooks/${hookName}`,
    });
  let n = 0;
  const statuses: number[] = [];
  await waitFor(
    async () => {
      const status = await post(progressSignedWithFresh(++n));
      statuses.push(status);
      return status === 202;
    },
    { timeoutMs: 30_000, what: 'the gate to verify replies signed with the new key' },
  );
  t.true(
    statuses.every((s) => s === 202 || s === 403),
    `refused as unsigned until loaded, then taken: ${statuses.join(' ')}`,
  );
  t.true(isHeld(await env.getRevision('rot-00001')), 'a progress report releases nothing');

  // 2. The new key goes first: the gate signs with it (the next resend carries such an id).
  await writeKeys([fresh, signing]);
  const after = await waitFor(() => hook.requests.find((r) => onlyFresh.verify(r.correlationid) !== undefined), {
    timeoutMs: 30_000,
    what: 'a request signed with the new key',
  });
  t.is(after.ceId, before.ceId, 'the same request, re-sent: only the signature changed');
  t.is(env.gate, gateInstance, 'no restart');

  // A reply to the request signed before the rotation still counts while the old key is in the ring.
  t.is((await asyncReply(before, 'progress', { progress: 90, message: 'almost' })).status, 202);
  t.is((await asyncReply(after, 'succeeded')).status, 202);
  await env.waitReleased('rot-00001');
});
