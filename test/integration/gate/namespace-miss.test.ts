// A Revision in a namespace the gate's cache has not seen is still held (H1). Before, the
// webhook read "not in the namespaces cache" as "not ours" and admitted the Revision unstamped:
// no hold, no hooks, and nothing ever looked at it again. That happens to a namespace applied
// together with its Service, and to every namespace created while the gate's namespaces watch is
// down. Now the webhook reads the namespace from the apiserver, and refuses (retryably) when it
// cannot; the controller picks the Revision up once its namespace reaches the cache.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { isHeld, revisionMethods } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, type CoreV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { HOOKS_ANNOTATION } from '../../../api/types.ts';
import { copyGateIdentity, type GateIdentity } from '../../support/gate-identity.ts';

let env: GateEnv;
let hook: HookServer;
let hookName: string;
let limited: GateIdentity | undefined;
const namespaces: string[] = [];

test.before(async () => {
  // The Revision webhook's own reads are tested: registered where the apiserver stamps too.
  env = await gateEnv('nsmiss', { gate: { revisionWebhook: 'always' } });
  hook = await startHookServer(async () => ({ status: 202 }));
  hookName = `${env.instance}-db`;
  // Every namespace of this gate instance (the label its namespace selector asks for).
  await env.createHook(hookName, {
    match: { namespaceSelector: { matchLabels: { 'prestart.dev/gate': env.instance } } },
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, {});
});

test.after.always(async () => {
  await limited?.restore().catch(() => undefined);
  await Promise.all(namespaces.map((name) => env.core.deleteNamespace({ name }).catch(() => undefined)));
  // The gate stops before the identity it runs as goes.
  await env?.stop();
  await limited?.delete();
  await hook?.close();
});

/** A namespace of this gate instance, and at once (no waiting for any cache) a Revision in it. */
async function namespaceWithRevision(core: CoreV1Api, suffix: string) {
  const namespace = `${env.instance}-${suffix}`;
  namespaces.push(namespace);
  await core.createNamespace({ body: { metadata: { name: namespace, labels: { 'prestart.dev/gate': env.instance } } } });
  const revisions = revisionMethods(env.admin, namespace);
  return { namespace, revisions, create: () => revisions.createRevision(`${suffix}-00001`) };
}

const stampedHooks = (rev: { metadata?: { annotations?: Record<string, string> } }) =>
  JSON.parse(rev.metadata?.annotations?.[HOOKS_ANNOTATION] ?? '[]') as string[];

test.serial('namespaces created together with their Revisions: every Revision is held and its hook asked', async (t) => {
  for (let i = 0; i < 5; i++) {
    const { revisions, create } = await namespaceWithRevision(env.core, `together${i}`);
    const rev = await create();
    t.true(isHeld(rev), `Revision in a namespace created a moment before (${i}) is held`);
    t.deepEqual(stampedHooks(rev), [hookName]);
    await revisions.waitForRun(`together${i}-00001`, 'the leader starts the run', (r) => r.status?.phase === 'Running');
  }
});

test.serial(
  'with the namespaces watch down, a new namespace’s Revision is held from a live read, refused when the gate cannot read it, and run once the watch is back',
  async (t) => {
    // The gate runs as a copy of its identity whose rights the test narrows; the apiserver ends
    // its watches every 2 s, so a lost right breaks the watch at once, as an outage would.
    limited = await copyGateIdentity(env);
    await env.gate.stop();
    const gate = await env.startGate({
      kubeConfig: limited.kubeConfig,
      watchTimeoutSeconds: 2,
      watchFailureSeconds: 1,
      revisionWebhook: 'always',
    });
    const healthz = new URL('/healthz', gate.sinkUrl).href;
    await limited.revoke({ group: '', resource: 'namespaces', verb: 'list' }, { group: '', resource: 'namespaces', verb: 'watch' });
    const failingSince = await waitFor(() => gate.informers().find((i) => i.name === 'namespaces')?.failingSince, {
      what: "the gate's namespaces watch to fail",
    });

    // Liveness reports the broken watch loop, with the apiserver's reason.
    const liveness = await waitFor(
      async () => {
        const res = await fetch(healthz);
        return res.status === 503 ? res.text() : undefined;
      },
      { what: '/healthz to report the namespaces watch' },
    );
    t.regex(liveness, /^namespaces: watch failing for \d+ s: Forbidden$/);

    const seen = await namespaceWithRevision(env.core, 'unseen');
    const held = await seen.create();
    t.true(isHeld(held), 'held, though the namespaces cache has never seen its namespace');
    t.deepEqual(stampedHooks(held), [hookName]);
    t.is(gate.informers().find((i) => i.name === 'namespaces')?.failingSince, failingSince, 'the watch was down all along');
    t.false(
      hook.requests.some((r) => r.data.revision.name === 'unseen-00001'),
      'the controller waits for the namespace to reach its cache',
    );

    // Now the gate cannot read namespaces at all: the Revision is refused, with a reason to retry.
    await limited.revoke({ group: '', resource: 'namespaces', verb: 'get' });
    const unreadable = await namespaceWithRevision(env.core, 'unreadable');
    const refusal = await unreadable.create().then(
      () => undefined,
      (err: unknown) => err,
    );
    t.true(refusal instanceof ApiException, 'the create failed');
    const body = JSON.parse(String((refusal as ApiException<string>).body)) as { code: number; message: string };
    t.is(body.code, 503);
    t.regex(body.message, new RegExp(`could not read namespace ${unreadable.namespace} to tell whether its Revisions are held`));
    t.regex(body.message, /nothing was created, retry/);
    await t.throwsAsync(unreadable.revisions.getRevision('unreadable-00001'), undefined, 'no Revision was stored');

    // The rights come back: the watch resumes, the namespace add wakes the held Revision, and the
    // refused create, retried as Knative retries it, is held.
    await limited.restore();
    await waitFor(() => hook.requests.find((r) => r.data.revision.name === 'unseen-00001'), {
      what: 'the request for the Revision held while its namespace was unknown',
    });
    await seen.revisions.waitForRun('unseen-00001', 'running', (r) => r.status?.phase === 'Running');
    t.is((await fetch(healthz)).status, 200, 'live again once the watch is back');
    const retried = await unreadable.create();
    t.true(isHeld(retried));
    t.deepEqual(stampedHooks(retried), [hookName]);
  },
);
