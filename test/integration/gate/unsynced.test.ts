// A gate whose first LIST fails is not ready and decides nothing (H2). client-node resolves an
// informer's start() even when its list failed, so before, such a gate came up Ready with an
// empty PrestartHook cache: every Revision it admitted skipped every hook, and as leader it
// marked hooks "not found" for good. Here the gate's identity may not list PrestartHooks (as when
// RBAC has not propagated yet, or the apiserver answers 429): the gate stays unready, its
// liveness fails with the reason, its webhook refuses Revisions with a reason to retry, and
// nothing leads. Given the right, it syncs, becomes ready, leads, and holds.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, CoordinationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { REVISIONS } from '../../../api/resources.ts';
import { HOOKS_ANNOTATION } from '../../../api/types.ts';
import type { RunningGate } from '../../../gate/gate.ts';
import { copyGateIdentity, type GateIdentity } from '../../support/gate-identity.ts';

let env: GateEnv;
let limited: GateIdentity;
let starting: Promise<RunningGate> | undefined;

test.before(async () => {
  env = await gateEnv('unsynced', { inProcess: false });
  limited = await copyGateIdentity(env);
});

test.after.always(async () => {
  // A gate still waiting for its caches finishes starting once it may list, and is then stopped.
  await limited?.restore().catch(() => undefined);
  await starting?.catch(() => undefined);
  await env?.stop();
  await limited?.delete();
});

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

test.serial(
  'a gate that cannot list PrestartHooks is not ready, refuses Revisions with a reason to retry, and holds once it can',
  async (t) => {
    const hookName = `${env.instance}-scan`;
    await env.createHook(hookName, { match: env.annotationMatch('scan'), delivery: { transport: 'http', url: 'http://127.0.0.1:9/' } });
    await limited.revoke({ group: 'prestart.dev', resource: 'prestarthooks', verb: 'list' });

    const [sinkPort] = (await freePorts(1)) as [number];
    const sink = `http://127.0.0.1:${sinkPort}`;
    starting = env.startGate({
      kubeConfig: limited.kubeConfig,
      sink: { host: '127.0.0.1', port: sinkPort, maxBytes: 64 * 1024 },
      watchFailureSeconds: 1,
      // The Revision webhook's refusal is tested: registered where the apiserver stamps too.
      revisionWebhook: 'always',
    });
    let started = false;
    void starting.then(() => {
      started = true;
    });

    // Not ready, and the probe says why.
    const readiness = await waitFor(async () => get(`${sink}/readyz`).catch(() => undefined), { what: 'the gate to answer /readyz' });
    t.is(readiness.status, 503);
    // /healthz may turn 503 (not listed for longer than watchFailureSeconds) before the failed
    // list's error is recorded, on a loaded machine: wait for the reason, which is what is checked.
    const liveness = await waitFor(
      async () => {
        const res = await get(`${sink}/healthz`);
        return res.status === 503 && res.text.includes('HTTP 403') ? res : undefined;
      },
      { what: '/healthz to report the failing list with its reason' },
    );
    t.regex(liveness.text, /prestarthooks: not listed yet: HTTP 403: .* cannot list resource "prestarthooks"/);
    t.regex((await get(`${sink}/readyz`)).text, /prestarthooks: not listed yet/);

    // The gate registers its webhook while it syncs. Once the apiserver calls it (a dry run stores
    // nothing), the webhook refuses the Revision rather than admit it unheld.
    await waitFor(
      async () => {
        const err = await env.custom
          .createNamespacedCustomObject({
            ...REVISIONS,
            namespace: env.namespace,
            dryRun: 'All',
            body: {
              apiVersion: 'serving.knative.dev/v1',
              kind: 'Revision',
              metadata: { name: 'probe' },
              spec: { containers: [{ image: 'x' }] },
            },
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        return err instanceof ApiException && String(err.body).includes('PrestartHooks');
      },
      { what: "the apiserver to call the gate's webhook" },
    );
    const refusal = await env.createRevision('scan-00001', { annotations: { scan: 'yes' } }).then(
      () => undefined,
      (err: unknown) => err,
    );
    t.true(refusal instanceof ApiException, 'the Revision was not admitted');
    const body = JSON.parse(String((refusal as ApiException<string>).body)) as { code: number; message: string };
    t.is(body.code, 503);
    t.regex(
      body.message,
      /the gate does not know the PrestartHooks yet \(prestarthooks: not listed yet: HTTP 403: .* cannot list resource "prestarthooks".*\); nothing was created, retry/,
    );
    await t.throwsAsync(env.getRevision('scan-00001'), undefined, 'no Revision was stored');
    t.false(started, 'the gate is still starting');
    const lease = await env.admin
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: `knative-prestart-gate-${env.instance}`, namespace: 'knative-prestart' })
      .catch(() => undefined);
    t.is(lease?.spec?.holderIdentity ?? undefined, undefined, 'nothing leads from an unsynced cache');

    // Given the right, the gate lists, becomes ready, leads, and holds the retried Revision.
    await limited.restore();
    const gate = await starting;
    t.true(gate.isLeader());
    t.deepEqual(await get(`${sink}/readyz`), { status: 200, text: 'ok' });
    t.deepEqual(await get(`${sink}/healthz`), { status: 200, text: 'ok' });
    const rev = await env.createRevision('scan-00001', { annotations: { scan: 'yes' } });
    t.true(isHeld(rev));
    t.deepEqual(JSON.parse(rev.metadata?.annotations?.[HOOKS_ANNOTATION] ?? '[]'), [hookName]);
    await env.waitForRun('scan-00001', 'the leader starts the run', (r) => r.status?.phase === 'Running');
  },
);
