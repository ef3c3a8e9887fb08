// A hook that is not ready yet answers `retry` (ask me again in N seconds), with a real gate on the
// real local control plane and a real HTTP hook served by the SDK (its replies posted to the
// gate's sink): the gate asks again at that moment as the next attempt, counts the retries, shows
// them where a person looks (`kubectl get prestartrun -o yaml`, `kn prestart why`, the Revision's
// hold reason and condition), and releases the Revision when the hook finally succeeds.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { controlPlaneBinaries } from '@knative-prestart/devcluster/binaries.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { Command } from 'commander';
import yaml from 'js-yaml';
import pino from 'pino';
import type { RunObject } from '../../../api/resources.ts';
import { PRESTART_CONDITION, type PrestartHookSpec, REASON_ANNOTATION } from '../../../api/types.ts';
import { registerPrestartCommands } from '../../../cli/prestart/commands.ts';
import { type HookOutcome, type HookRequest, type HookServer, retryAfter, serveHook, succeed } from '../../../hooks/sdk/index.ts';

let env: GateEnv;
const hooks: HookServer[] = [];

test.before(async () => {
  env = await gateEnv('retry');
});

test.after.always(async () => {
  for (const h of hooks) await h.close();
  await env?.stop();
});

/** `kn prestart <args>` in this process, as the admin. */
async function prestart(args: string[]): Promise<string> {
  const out: string[] = [];
  const program = new Command('knative-prestart').exitOverride();
  registerPrestartCommands(program, { out: (text) => void out.push(text), setExitCode: () => undefined, now: () => new Date() });
  await program.parseAsync(['node', 'knative-prestart', ...args, '--kubeconfig', env.cluster.kubeconfigPath]);
  return out.join('\n').trim();
}

/** `kubectl get prestartrun NAME -o yaml`, with the real kubectl, parsed. */
async function kubectlRun(name: string): Promise<RunObject> {
  const { stdout } = await promisify(execFile)(controlPlaneBinaries().kubectl, [
    '--kubeconfig',
    env.cluster.kubeconfigPath,
    'get',
    'prestartrun',
    name,
    '-n',
    env.namespace,
    '-o',
    'yaml',
  ]);
  return yaml.load(stdout) as RunObject;
}

/** A PrestartHook matching annotation `key`, served by an SDK hook on 127.0.0.1 running `handler`. */
async function sdkHook(
  key: string,
  handler: (req: HookRequest) => Promise<HookOutcome>,
  spec: Pick<PrestartHookSpec, 'timeout' | 'retryAfter'> | Record<string, never> = {},
) {
  const name = `${env.instance}-${key}`;
  const asked: { attempt: number; id: string; deadline: string; at: number }[] = [];
  const server = await serveHook({
    name,
    host: '127.0.0.1',
    port: 0,
    sink: '',
    logger: pino({ level: 'silent' }),
    handler: async (req) => {
      asked.push({ attempt: req.attempt, id: String(req.event.id), deadline: req.deadline.toISOString(), at: Date.now() });
      return handler(req);
    },
  });
  hooks.push(server);
  await env.createHook(name, {
    match: env.annotationMatch(key, 'yes'),
    timeout: spec.timeout ?? '2m',
    ...(spec.retryAfter ? { retryAfter: spec.retryAfter } : {}),
    delivery: { transport: 'http', url: server.url },
  });
  await env.waitUntilStamped(name, { [key]: 'yes' });
  return { name, asked };
}

test.serial('retry after 1 s twice, then success: asked again as attempts 2 and 3, counted, shown, and released', async (t) => {
  let grant: () => void = () => undefined;
  const granted = new Promise<void>((resolve) => {
    grant = resolve;
  });
  // Attempts 1 and 2 find the quota busy; attempt 3 succeeds once the test has looked at it.
  const { name, asked } = await sdkHook('quota', async (req) => {
    if (req.attempt <= 2) return retryAfter(1, 'quota busy');
    await granted;
    return succeed('quota granted');
  });
  await env.createRevision('quota-00001', { annotations: { quota: 'yes' } });

  const third = await env.waitForRun('quota-00001', 'attempt 3 requested', (r) => r.status?.hooks[0]?.attempt === 3, 30_000);
  t.like(third.status?.hooks[0], { name, phase: 'Requested', attempt: 3, retries: 2, retryReason: 'quota busy' });
  t.true(isHeld(await env.getRevision('quota-00001')), 'held while attempt 3 runs');
  const why = await prestart(['why', 'quota-00001', '-n', env.namespace]);
  t.regex(why, new RegExp(`is held while it waits for hook ${name} \\(order 0, attempt 3, after 2 retries, times out in \\d`));

  grant();
  await env.waitReleased('quota-00001');
  const run = await waitFor(
    async () => {
      const r = await kubectlRun('quota-00001');
      return r.status?.phase === 'Released' ? r : undefined;
    },
    { timeoutMs: 30_000, what: 'the run to be Released' },
  );
  t.like(run.status?.hooks[0], { name, phase: 'Succeeded', attempt: 3, retries: 2, retryReason: 'quota busy', message: 'quota granted' });
  t.is(run.status?.hooks[0]?.retryAt, undefined);

  // Three attempts, each a new CloudEvent id, the same deadline, each asked at least 1 s after the retry before it.
  t.deepEqual(
    asked.map((a) => a.attempt),
    [1, 2, 3],
  );
  t.deepEqual(
    asked.map((a) => a.id),
    [1, 2, 3].map((n) => `${run.metadata?.uid}/${name}/${n}`),
  );
  t.is(new Set(asked.map((a) => a.deadline)).size, 1, 'retries do not extend the deadline');
  for (let i = 1; i < asked.length; i++) {
    const gap = (asked[i]?.at ?? 0) - (asked[i - 1]?.at ?? 0);
    t.true(gap >= 900, `attempt ${i + 1} asked ${gap} ms after attempt ${i}`);
  }
});

test.serial('while it waits to be asked again, kn prestart, the run and the Revision say when, why and which attempt', async (t) => {
  // The admin's bounds: the hook asks for 2 minutes, the PrestartHook allows 1 and 3 retries.
  const { name } = await sdkHook('later', async () => retryAfter(120, 'dependency orders-db not ready'), {
    timeout: '10m',
    retryAfter: { maxDelay: '1m', maxRetries: 3 },
  });
  await env.createRevision('later-00001', { annotations: { later: 'yes' } });
  const run = await env.waitForRun('later-00001', 'waiting to retry', (r) => r.status?.hooks[0]?.retryAt !== undefined, 30_000);
  const reason = 'dependency orders-db not ready (asked for 2m, cut to spec.retryAfter.maxDelay 1m)';
  t.like(run.status?.hooks[0], { phase: 'Requested', attempt: 1, retries: 1, retryReason: reason });
  t.deepEqual(run.spec.hooks[0]?.retryAfter, { maxDelaySeconds: 60, maxRetries: 3 }, 'the run keeps the bounds it started with');
  const waited = Date.parse(run.status?.hooks[0]?.retryAt ?? '') - Date.parse(run.status?.hooks[0]?.requestedAt ?? '');
  t.true(waited > 55_000 && waited <= 61_000, `asked again about a minute after the request, not two (${waited} ms)`);

  const why = await prestart(['why', 'later-00001', '-n', env.namespace]);
  t.regex(
    why,
    /retrying in (1m0s|\d+s): dependency orders-db not ready \(asked for 2m, cut to spec.retryAfter.maxDelay 1m\) \(attempt 2, retry 1 of 3\)/,
  );
  const list = await prestart(['list', '-n', env.namespace]);
  t.regex(
    list,
    new RegExp(`later-00001 .* ${name} retrying in (1m0s|\\d+s): dependency orders-db not ready`),
    'the list cuts its last column at 80 characters',
  );

  // Knative's own message: the hold reason the hold policy's denial shows, and the gate's condition on the Revision.
  const line = new RegExp(
    `^hook ${name} retrying at \\d\\d:\\d\\d:\\d\\dZ \\(attempt 2, retry 1 of 3\\): dependency orders-db not ready \\(asked for 2m, cut to spec.retryAfter.maxDelay 1m\\)$`,
  );
  const rev = await waitFor(
    async () => {
      const r = await env.getRevision('later-00001');
      const condition = r.status?.conditions?.find((c) => c.type === PRESTART_CONDITION);
      return r.metadata?.annotations?.[REASON_ANNOTATION] && condition?.reason?.includes('retrying at') ? r : undefined;
    },
    { timeoutMs: 15_000, what: 'the hold reason and the condition to say it retries' },
  );
  t.regex(rev.metadata?.annotations?.[REASON_ANNOTATION] ?? '', line);
  t.true(isHeld(rev));
});

test.serial('the apiserver refuses a PrestartHook whose retryAfter bounds make no sense', async (t) => {
  const delivery = { transport: 'http' as const, url: 'http://127.0.0.1:9/' };
  const refused = await t.throwsAsync(env.createHook(`${env.instance}-bad-delay`, { retryAfter: { maxDelay: '500ms' }, delivery }));
  t.regex(String((refused as { body?: unknown })?.body ?? refused?.message), /retryAfter.maxDelay must be at least 1s/);
  const negative = await t.throwsAsync(env.createHook(`${env.instance}-bad-count`, { retryAfter: { maxRetries: -1 }, delivery }));
  t.regex(
    String((negative as { body?: unknown })?.body ?? negative?.message),
    /spec.retryAfter.maxRetries: Invalid value: -1: .*greater than or equal to 0/,
  );
});
