// A hook that is not ready yet, against real Knative Serving: it answers retry (ask me again in
// 15 s), and while the gate waits Knative's own message says so (its InternalError event quotes the
// hold policy's denial, which carries the gate's hold reason), as does `kn revision describe` (the
// gate's condition); the gate asks again as attempt 2, the hook succeeds, and Knative creates the
// Deployment.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { knBinary } from '@knative-prestart/devcluster/kn.ts';
import {
  type CoreEvent,
  condition,
  firstSighting,
  Knative,
  type KnativeObject,
  waitForRevision,
  watchCollection,
} from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import test from 'ava';
import pino from 'pino';
import { PRESTART_CONDITION } from '../../api/types.ts';
import { type HookServer, retryAfter, serveHook, succeed } from '../../hooks/sdk/index.ts';

const KEY = 'retry-after';
/** Long enough to look at what the waiting Revision shows; the gate then asks again. */
const DELAY_S = 15;
let env: GateEnv;
let serving: KnativeServing;
let kn: Knative;
let hookServer: HookServer;
const attempts: number[] = [];

test.before(async () => {
  env = await gateEnv('retryafter');
  serving = await startKnativeServing(env.cluster, { progress: (line) => process.stderr.write(`e2e: ${line}\n`) });
  kn = new Knative(env.admin, env.namespace);
  const name = `${env.instance}-quota`;
  hookServer = await serveHook({
    name,
    host: '127.0.0.1',
    port: 0,
    sink: '',
    logger: pino({ name: 'quota-hook', level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
    handler: async (req) => {
      attempts.push(req.attempt);
      return req.attempt === 1 ? retryAfter(DELAY_S, 'quota busy: 0 of 8 databases free') : succeed('quota granted');
    },
  });
  await env.createHook(name, {
    match: env.annotationMatch(KEY, 'on'),
    timeout: '5m',
    delivery: { transport: 'http', url: hookServer.url },
  });
  await env.waitUntilStamped(name, { [KEY]: 'on' });
});

test.after.always(async () => {
  await hookServer?.close();
  await env?.stop();
  await serving?.stop();
});

const revision = (what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 60_000) =>
  waitForRevision(kn, 'demo-00001', what, ok, { timeoutMs, logs: serving.controllerLog });

test.serial('while the gate waits to ask again, Knative and kn say when and why; then attempt 2 releases it', async (t) => {
  const hook = `${env.instance}-quota`;
  const events = await watchCollection<CoreEvent>(env.admin, `/api/v1/namespaces/${env.namespace}/events`, {
    fieldSelector: 'involvedObject.name=demo-00001',
  });
  t.teardown(() => events.stop());
  await kn.createService('demo', { annotations: { [KEY]: 'on' } });

  const line = `hook ${hook} retrying at \\d\\d:\\d\\d:\\d\\dZ \\(attempt 2, retry 1 of 10\\): quota busy: 0 of 8 databases free`;
  // Knative's own message: its Deployment create was denied with the hold reason the gate wrote.
  const denied = await firstSighting(
    events.seen,
    (e) => e.reason === 'InternalError' && new RegExp(line).test(e.message ?? ''),
    'Knative’s InternalError event quoting the retry',
    (DELAY_S - 3) * 1000,
  );
  t.regex(
    denied.object.message ?? '',
    new RegExp(
      `knative-prestart: Revision demo-00001 is held until its pre-start hooks finish; see: kubectl get prestartrun demo-00001 -n ${env.namespace}; reason: ${line}`,
    ),
  );
  // kn's view: the gate's condition on the Revision.
  const held = await revision('the gate’s condition to say it retries', (r) =>
    (condition(r, PRESTART_CONDITION)?.reason ?? '').includes('retrying at'),
  );
  t.is(condition(held, PRESTART_CONDITION)?.status, 'Unknown');
  t.not(condition(held, 'Ready')?.status, 'False', 'a retry is not a failure of the Revision');
  const { stdout } = await promisify(execFile)(knBinary(), ['revision', 'describe', 'demo-00001', '-n', env.namespace], {
    env: { PATH: process.env.PATH ?? '', HOME: env.cluster.dir, KUBECONFIG: env.cluster.kubeconfigPath },
  });
  t.regex(
    stdout,
    new RegExp(`${PRESTART_CONDITION} +\\S+ +${hook} retrying at \\d\\d:\\d\\d:\\d\\dZ \\(attempt 2, retry 1\\): quota busy`),
  );

  // The gate asks again as attempt 2, which succeeds: released, and Knative's Deployment follows.
  // (The gate writes its condition's final state a moment after the release.)
  await revision(
    'Ready, and the gate’s condition released, after attempt 2',
    (r) => condition(r, 'Ready')?.status === 'True' && condition(r, PRESTART_CONDITION)?.status === 'True',
    (DELAY_S + 60) * 1000,
  );
  t.deepEqual(attempts, [1, 2]);
});
