// Shadow mode and heartbeats with a real gate on the real local control plane: an Audit hook that
// fails never holds the Revision and the run says what it would have decided; a hook that goes
// silent longer than its heartbeatTimeout is TimedOut long before its timeout.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import test from 'ava';
import type { PrestartHookSpec } from '../../../api/types.ts';

let env: GateEnv;
const servers: HookServer[] = [];

test.before(async () => {
  env = await gateEnv('audit');
});

test.after.always(async () => {
  for (const s of servers) await s.close();
  await env?.stop();
});

async function hookServing(key: string, spec: Partial<PrestartHookSpec>, answer: Parameters<typeof startHookServer>[0]) {
  const server = await startHookServer(answer);
  servers.push(server);
  const name = `${env.instance}-${key}`;
  await env.createHook(name, { match: env.annotationMatch(key, 'yes'), ...spec, delivery: { transport: 'http', url: server.url } });
  await env.waitUntilStamped(name, { [key]: 'yes' });
  return name;
}

test('an Audit hook that fails does not hold the Revision; the run records what it would have decided', async (t) => {
  const enforce = await hookServing('gate-ok', { order: 1 }, async (req) => syncReply(req, 'succeeded'));
  const audit = await hookServing('new-scan', { order: 1, mode: 'Audit' }, async (req) =>
    syncReply(req, 'failed', { message: 'image has 3 critical CVEs' }),
  );
  await env.createRevision('shadow-00001', { annotations: { 'gate-ok': 'yes', 'new-scan': 'yes' } });
  await env.waitReleased('shadow-00001');
  // The run's Released status follows the release (decide's finishInterruptedRelease), so wait for it.
  const run = await env.waitForRun('shadow-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.like(
    run.status?.hooks.find((h) => h.name === audit),
    { phase: 'Failed' },
    'the audit outcome is recorded',
  );
  t.like(
    run.status?.hooks.find((h) => h.name === enforce),
    { phase: 'Succeeded' },
  );
  t.is(run.spec.hooks.find((h) => h.name === audit)?.mode, 'Audit', 'the snapshot keeps the mode');
  t.regex(
    run.status?.conditions.find((c) => c.type === 'Ready')?.message ?? '',
    new RegExp(`audit only \\(would have held\\): hook ${audit} failed: image has 3 critical CVEs`),
  );
});

test('a hook silent longer than its heartbeatTimeout is TimedOut within its timeout', async (t) => {
  // Accepts the request (202) and never reports progress.
  const silent = await hookServing('silent', { timeout: '10m', heartbeatTimeout: '3s', resendInterval: '10m' }, async () => ({
    status: 202,
  }));
  const started = Date.now();
  await env.createRevision('silent-00001', { annotations: { silent: 'yes' } });
  const run = await env.waitForRun('silent-00001', 'TimedOut by its heartbeat', (r) => r.status?.phase === 'Failed', 30_000);
  t.like(run.status?.hooks[0], { name: silent, phase: 'TimedOut' });
  t.regex(run.status?.hooks[0]?.message ?? '', /^no sign of life within 3s \(heartbeatTimeout\) since the request at /);
  t.true(Date.now() - started < 60_000, 'minutes before the 10m timeout');
});
