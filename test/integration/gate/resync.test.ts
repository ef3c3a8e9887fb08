// The periodic resync picks up what no event covers. Here: a held Revision whose namespace left
// the gate's scope and came back. While out of scope the gate ignores the Revision; coming back
// is an event of the Namespace, not of the Revision, so only the resync reconciles it again.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import { HOLD_LABEL, HOOKS_ANNOTATION } from '../../../api/types.ts';

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('resync', { inProcess: false });
  await env.startGate({ resyncSeconds: 1 });
});

test.after.always(async () => {
  await env?.stop();
});

async function setScopeLabel(value: string | null): Promise<void> {
  await env.core.patchNamespace(
    { name: env.namespace, body: { metadata: { labels: { 'prestart.dev/gate': value } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

test('a held Revision no event wakes is reconciled by the resync and released', async (t) => {
  const hook = await startHookServer(async () => ({ status: 202 }));
  t.teardown(() => hook.close());
  const hookName = `${env.instance}-db`;
  await env.createHook(hookName, { match: env.annotationMatch('resync', 'yes'), delivery: { transport: 'http', url: hook.url } });
  await env.waitUntilStamped(hookName, { resync: 'yes' });

  await setScopeLabel(null);
  await waitFor(() => !env.gate.inScope(env.namespace), { what: 'the namespace to leave the gate’s scope' });
  // Held as the gate stamped it before the namespace left; its add event finds no namespace in scope.
  await env.createRevision('res-00001', {
    labels: { [HOLD_LABEL]: 'true' },
    annotations: { resync: 'yes', [HOOKS_ANNOTATION]: JSON.stringify([hookName]) },
  });
  await setScopeLabel(env.instance);

  const request = await waitFor(() => hook.requests[0], { timeoutMs: 30_000, what: 'the resync to send the request' });
  t.is(request.data.revision.name, 'res-00001');
  await asyncReply(request, 'succeeded');
  const run = await env.waitForRun('res-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.summary, '1/1');
  await env.waitReleased('res-00001');
});
