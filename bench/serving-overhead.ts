// The gate's overhead on a Knative rollout, with Knative Serving's own controllers: time from a
// Service update to its new Revision Ready, for a Service no hook matches and for one whose
// Revisions a no-op hook (answers "succeeded" at once, no bindings) holds and releases. Also
// the time to Knative's Deployment, where the whole hold happens: Ready adds the pods and the
// HPA controller's 1 s sync, the same for both and a source of noise.
//
//   node --import tsx bench/serving-overhead.ts [--rounds 7]
//
// Starts its own control plane, Knative Serving and a gate; prints every round, then the
// medians, their difference and ratio. Revision Ready needs no networking layer (only Route
// readiness would), so nothing here is a stand-in.
import { createHook, deleteHook, gateEnv, hookSpec, startHookServer } from '../test/cluster/gate-harness.ts';
import { startKnativeServing } from '../test/cluster/knative-serving.ts';
import { condition, firstSighting, Knative, type KnativeObject, waitUntilStamped, watchCollection } from '../test/e2e/_serving.ts';
import { syncReply } from '../test/integration/gate/_replies.ts';

const args = process.argv.slice(2);
const roundsFlag = args.indexOf('--rounds');
const rounds = roundsFlag >= 0 ? Number(args[roundsFlag + 1]) : 7;
const HOOK_ANNOTATION = 'bench-prestart';

const say = (line: string) => process.stdout.write(`${line}\n`);
const ms = (v: number) => `${v.toFixed(0).padStart(5)} ms`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const env = await gateEnv('bench');
const serving = await startKnativeServing(env.cluster);
const kn = new Knative(env.admin, env.namespace);
const noop = await startHookServer(async (req) => syncReply(req, 'succeeded', { message: 'nothing to do' }));
const hookName = `${env.instance}-noop`;
const revisions = await watchCollection<KnativeObject>(env.admin, `/apis/serving.knative.dev/v1/namespaces/${env.namespace}/revisions`);
const deployments = await watchCollection<KnativeObject>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);

try {
  await createHook(
    env,
    hookName,
    hookSpec(
      {
        match: {
          annotation: { key: HOOK_ANNOTATION, value: 'noop' },
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
        },
        delivery: { transport: 'http', url: noop.url },
      },
      env.namespace,
    ),
  );
  await waitUntilStamped(env, hookName, { [HOOK_ANNOTATION]: 'noop' });

  const services = { plain: {}, hooked: { [HOOK_ANNOTATION]: 'noop' } } as const;
  const readyOf = (name: string) =>
    firstSighting(
      revisions.seen,
      (r) => r.metadata?.name === name && condition(r, 'Ready')?.status === 'True',
      `Revision ${name} Ready`,
      120_000,
    );
  const deploymentOf = (name: string) =>
    firstSighting(
      deployments.seen,
      (d) => d.metadata?.labels?.['serving.knative.dev/revision'] === name,
      `the Deployment of ${name}`,
      120_000,
    );
  const revisionName = (svc: string, n: number) => `${svc}-${String(n).padStart(5, '0')}`;

  // First Revisions (not measured: they include creating the Services' other resources).
  for (const [svc, annotations] of Object.entries(services)) await kn.createService(svc, { annotations });
  for (const svc of Object.keys(services)) await readyOf(revisionName(svc, 1));

  const times: Record<keyof typeof services, number[]> = { plain: [], hooked: [] };
  const toDeployment: Record<keyof typeof services, number[]> = { plain: [], hooked: [] };
  for (let round = 1; round <= rounds; round++) {
    // Alternate which goes first, so neither always meets a busier controller.
    const order = (round % 2 ? ['plain', 'hooked'] : ['hooked', 'plain']) as (keyof typeof services)[];
    for (const svc of order) {
      const t0 = performance.now();
      await kn.updateService(svc, { annotations: services[svc], env: { ROUND: String(round) } });
      const ready = await readyOf(revisionName(svc, round + 1));
      const deployment = await deploymentOf(revisionName(svc, round + 1));
      times[svc].push(ready.at - t0);
      toDeployment[svc].push(deployment.at - t0);
    }
    say(
      `round ${round}: to Ready: no hook ${ms(times.plain.at(-1) ?? 0)}, no-op hook ${ms(times.hooked.at(-1) ?? 0)}` +
        `   to Deployment: no hook ${ms(toDeployment.plain.at(-1) ?? 0)}, no-op hook ${ms(toDeployment.hooked.at(-1) ?? 0)}`,
    );
  }

  const report = (what: string, xs: Record<keyof typeof services, number[]>) => {
    const [plain, hooked] = [median(xs.plain), median(xs.hooked)];
    say(`Service update -> ${what}, ${rounds} rounds:`);
    say(`  no hook:     median ${ms(plain)}   mean ${ms(mean(xs.plain))}`);
    say(`  no-op hook:  median ${ms(hooked)}   mean ${ms(mean(xs.hooked))}`);
    say(`  gate overhead: ${hooked >= plain ? '+' : ''}${(hooked - plain).toFixed(0)} ms (median), ratio ${(hooked / plain).toFixed(2)}x`);
  };
  say('');
  say("Knative Serving's own controllers, HPA class, pods on kwok nodes, one gate with one no-op hook (HTTP, synchronous reply).");
  report('new Revision Ready', times);
  report("Knative's Deployment created", toDeployment);
} finally {
  revisions.stop();
  deployments.stop();
  await deleteHook(env, hookName);
  await noop.close();
  await env.stop();
  await serving.stop();
  await env.cluster.stop();
}
