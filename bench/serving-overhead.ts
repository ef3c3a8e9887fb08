// The gate's overhead on a Knative rollout, with Knative Serving's own controllers: time from a
// Service update to its new Revision Ready, for a Service no hook matches and for Services whose
// Revisions a no-op hook (answers "succeeded" at once, no bindings) holds and releases: one hook
// over direct HTTP, one through Knative Eventing's real Broker (request and reply each through
// ingress, channel and filter). Also the time to Knative's Deployment, where the whole hold
// happens: Ready adds the pods and the HPA controller's 1 s sync, the same for all and a source
// of noise.
//
//   node --import tsx bench/serving-overhead.ts [--rounds 7]
//
// Starts its own control plane, Knative Serving and Eventing and a gate; prints every round,
// then the medians, their differences and ratios against the Service without a hook, measured in
// the same run. Revision Ready needs no networking layer (only Route readiness would); the one
// stand-in is the Broker's cluster DNS (devcluster/service-proxy.ts).
//
// Then where the time of the HTTP hook goes, step by step (medians over the rounds), from watches
// on Revisions, PrestartRuns and Deployments and the hook's own clock: Knative creates the
// Revision (through the gate's stamping webhook), the gate creates the PrestartRun (which records
// the request) and sends it, the hook answers, the gate records the reply (with the request, in one
// status write), removes the hold, and Knative creates the Deployment; the Service without a hook
// beside it. Last, the floor under that overhead: the three writes a held Revision needs one after
// the other (run create, reply, release), each as the gate timed it (its
// prestart_gate_kube_request_duration_seconds) and as the apiserver did (apiserver_request_duration_seconds).
//
//   --http-only   leaves out the Broker (no Eventing controllers; quicker)

import { bulkWriter } from '@knative-prestart/devcluster/bulk.ts';
import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { condition, firstSighting, Knative, type KnativeObject, watchCollection } from '@knative-prestart/devcluster/knative-client.ts';
import { startKnativeEventing } from '@knative-prestart/devcluster/knative-eventing.ts';
import { startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { HOLD_LABEL, type PrestartHookSpec, type PrestartRunStatus } from '../api/types.ts';
import { histogram, meanMsBetween } from './_common.ts';

const args = process.argv.slice(2);
const roundsFlag = args.indexOf('--rounds');
const rounds = roundsFlag >= 0 ? Number(args[roundsFlag + 1]) : 15;
const httpOnly = args.includes('--http-only');
const HOOK_ANNOTATION = 'bench-prestart';

const say = (line: string) => process.stdout.write(`${line}\n`);
const ms = (v: number) => `${v.toFixed(0).padStart(5)} ms`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const env = await gateEnv('bench', { inProcess: false });
const serving = await startKnativeServing(env.cluster);
const eventing = httpOnly ? undefined : await startKnativeEventing(env.cluster);
await eventing?.createBroker(env.namespace, 'default');
const [sinkPort] = (await freePorts(1)) as [number];
await env.startGate({
  sink: { host: '127.0.0.1', port: sinkPort, maxBytes: 64 * 1024 },
  ...(eventing
    ? { triggers: { replyUri: `http://127.0.0.1:${sinkPort}/events`, namespaces: [env.namespace] }, broker: { proxy: eventing.proxyUrl } }
    : {}),
});
const kn = new Knative(env.admin, env.namespace);
// Synchronous "succeeded": over HTTP the gate reads it from the answer; through the Broker the
// filter hands it back to the Broker, and the reply Trigger brings it to the gate's sink.
/** When the hook saw each Revision's request (performance.now()). */
const hookSaw = new Map<string, number>();
const noop = await startHookServer(async (req) => {
  if (req.data.action === 'start') hookSaw.set(req.data.revision.name, performance.now());
  return syncReply(req, 'succeeded', { message: 'nothing to do' });
});
const deliveries: Partial<Record<'http' | 'broker', PrestartHookSpec['delivery']>> = {
  http: { transport: 'http', url: noop.url },
  ...(eventing
    ? { broker: { transport: 'broker', broker: { name: 'default', namespace: env.namespace, subscriber: { uri: noop.url } } } }
    : {}),
};
/** What the gate writes for a held Revision, in order: what the overhead cannot go below without writing less. */
const WRITES = [
  { verb: 'create', resource: 'prestartruns', method: 'POST', subresource: '', what: 'the run, recording the request' },
  { verb: 'update', resource: 'prestartruns/status', method: 'PUT', subresource: 'status', what: 'the reply' },
  { verb: 'patch', resource: 'revisions', method: 'PATCH', subresource: '', what: "the release (through Knative's webhooks)" },
] as const;
type Timed = { sum: number; count: number };
const apiserver = await bulkWriter(env.admin, 1);
/** The gate's histogram of its own apiserver calls, and the apiserver's of the same verbs and resources. */
async function writeTimes(): Promise<{ gate: Timed[]; apiserver: Timed[] }> {
  const gateText = await (await fetch(`http://127.0.0.1:${sinkPort}/metrics`)).text();
  const serverText = await apiserver.getText('/metrics');
  return {
    gate: WRITES.map((w) =>
      histogram(gateText, 'prestart_gate_kube_request_duration_seconds', new RegExp(`verb="${w.verb}",resource="${w.resource}"`)),
    ),
    apiserver: WRITES.map((w) => {
      const plural = w.resource.split('/')[0];
      return histogram(
        serverText,
        'apiserver_request_duration_seconds',
        new RegExp(`(?=.*[{,]resource="${plural}")(?=.*subresource="${w.subresource}")(?=.*verb="${w.method}")`),
      );
    }),
  };
}

const revisions = await watchCollection<KnativeObject>(env.admin, `/apis/serving.knative.dev/v1/namespaces/${env.namespace}/revisions`);
const deployments = await watchCollection<KnativeObject>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);
const runs = await watchCollection<KnativeObject & { status?: PrestartRunStatus }>(
  env.admin,
  `/apis/prestart.dev/v1alpha1/namespaces/${env.namespace}/prestartruns`,
);

try {
  for (const [kind, delivery] of Object.entries(deliveries)) {
    const name = `${env.instance}-noop-${kind}`;
    await env.createHook(name, {
      match: env.annotationMatch(HOOK_ANNOTATION, kind),
      delivery,
    });
    await env.waitUntilStamped(name, { [HOOK_ANNOTATION]: kind });
  }

  const allServices = { plain: {}, http: { [HOOK_ANNOTATION]: 'http' }, broker: { [HOOK_ANNOTATION]: 'broker' } } as const;
  type Kind = keyof typeof allServices;
  const kinds = (Object.keys(allServices) as Kind[]).filter((k) => k !== 'broker' || eventing);
  const services = Object.fromEntries(kinds.map((k) => [k, allServices[k]])) as Partial<typeof allServices>;
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
  for (const [svc, annotations] of Object.entries(services)) await kn.createService(svc, { annotations: { ...annotations } });
  for (const svc of Object.keys(services)) await readyOf(revisionName(svc, 1));

  const writesBefore = await writeTimes();
  const times: Record<Kind, number[]> = { plain: [], http: [], broker: [] };
  const toDeployment: Record<Kind, number[]> = { plain: [], http: [], broker: [] };
  /** Per round, when each step of a Service's new Revision was first seen (performance.now()). */
  const steps: Record<Kind, Record<string, number>[]> = { plain: [], http: [], broker: [] };
  const seenAt = <T extends KnativeObject>(list: { object: T; at: number }[], ok: (o: T) => boolean) =>
    list.find((x) => ok(x.object))?.at ?? Number.NaN;
  for (let round = 1; round <= rounds; round++) {
    // Rotate which goes first, so none always meets a busier controller.
    const order = kinds.map((_, i) => kinds[(i + round) % kinds.length] as Kind);
    for (const svc of order) {
      const t0 = performance.now();
      await kn.updateService(svc, { annotations: { ...services[svc] }, env: { ROUND: String(round) } });
      const name = revisionName(svc, round + 1);
      const ready = await readyOf(name);
      const deployment = await deploymentOf(name);
      times[svc].push(ready.at - t0);
      toDeployment[svc].push(deployment.at - t0);
      const ofRun = (ok: (r: KnativeObject & { status?: PrestartRunStatus }) => boolean) =>
        seenAt(runs.seen, (r) => r.metadata?.name === name && ok(r));
      steps[svc].push({
        update: t0,
        revision: seenAt(revisions.seen, (r) => r.metadata?.name === name),
        run: ofRun(() => true),
        hook: hookSaw.get(name) ?? Number.NaN,
        replied: ofRun((r) => r.status?.hooks?.[0]?.phase === 'Succeeded'),
        released: seenAt(
          revisions.seen,
          (r) =>
            r.metadata?.name === name &&
            r.metadata?.labels?.[HOLD_LABEL] === undefined &&
            r.metadata?.annotations?.['prestart.dev/hooks'] !== undefined,
        ),
        runReleased: ofRun((r) => r.status?.phase === 'Released'),
        deployment: deployment.at,
      });
    }
    say(
      `round ${round}: to Ready: ${kinds.map((k) => `${k} ${ms(times[k].at(-1) ?? 0)}`).join(', ')}` +
        `   to Deployment: ${kinds.map((k) => `${k} ${ms(toDeployment[k].at(-1) ?? 0)}`).join(', ')}`,
    );
  }

  const label: Record<Kind, string> = { plain: 'no hook:         ', http: 'no-op hook, HTTP:', broker: 'no-op hook, Broker:' };
  const report = (what: string, xs: Record<Kind, number[]>) => {
    const plain = median(xs.plain);
    say(`Service update -> ${what}, ${rounds} rounds:`);
    for (const k of kinds) {
      const m = median(xs[k]);
      const overhead =
        k === 'plain' ? '' : `   overhead ${m >= plain ? '+' : ''}${(m - plain).toFixed(0)} ms, ratio ${(m / plain).toFixed(2)}x`;
      say(`  ${label[k].padEnd(20)} median ${ms(m)}   mean ${ms(mean(xs[k]))}${overhead}`);
    }
  };
  say('');
  say("Knative Serving's own controllers, HPA class, pods on kwok nodes, one gate; no-op hooks answer synchronously.");
  report('new Revision Ready', times);
  report("Knative's Deployment created", toDeployment);

  // Where the time goes: each step's delay after the one before, median over the rounds.
  const chain: [string, string, string][] = [
    ['update', 'revision', 'Knative creates the Revision (through the stamping webhook)'],
    ['revision', 'run', 'gate: PrestartRun created (its spec.startedAt records the request)'],
    ['run', 'hook', 'gate: request reaches the hook'],
    ['hook', 'replied', 'hook answers, gate records the reply'],
    ['replied', 'released', 'gate: hold removed'],
    ['released', 'deployment', 'Knative creates the Deployment'],
  ];
  say('');
  say('Where the time goes, HTTP hook vs no hook (median ms of each step after the one before):');
  for (const [from, to, what] of chain) {
    const d = (k: Kind) => median(steps[k].map((s) => (s[to] ?? Number.NaN) - (s[from] ?? Number.NaN)).filter(Number.isFinite));
    const plainStep = from === 'update' ? d('plain') : Number.NaN;
    say(`  ${what.padEnd(62)} ${ms(d('http'))}${Number.isFinite(plainStep) ? `   (no hook: ${ms(plainStep)})` : ''}`);
  }
  const plainRevToDep = median(steps.plain.map((s) => (s.deployment ?? 0) - (s.revision ?? 0)));
  say(`  ${'no hook: Revision created -> Deployment created'.padEnd(62)} ${ms(plainRevToDep)}`);
  const after = median(steps.http.map((s) => (s.runReleased ?? Number.NaN) - (s.released ?? Number.NaN)).filter(Number.isFinite));
  say(`  (the run's Released status, bookkeeping after the release, lands ${after.toFixed(0)} ms after the hold is removed)`);

  // The floor under the overhead: the three writes a held Revision needs, one after the other.
  const writesAfter = await writeTimes();
  say('');
  say("The writes a held Revision needs, in this order (mean over the rounds, as the gate timed them; the apiserver's own time beside):");
  let floor = 0;
  for (const [i, w] of WRITES.entries()) {
    const gate = meanMsBetween(writesBefore.gate[i] as Timed, writesAfter.gate[i] as Timed);
    const server = meanMsBetween(writesBefore.apiserver[i] as Timed, writesAfter.apiserver[i] as Timed);
    floor += gate;
    say(`  ${`${w.verb} ${w.resource}`.padEnd(30)} ${ms(gate)}   (apiserver ${ms(server)})   ${w.what}`);
  }
  const overhead = median(toDeployment.http) - median(toDeployment.plain);
  say(`  ${'in a row'.padEnd(30)} ${ms(floor)}   of the +${overhead.toFixed(0)} ms the HTTP hook adds before the Deployment`);
} finally {
  revisions.stop();
  apiserver.close();
  deployments.stop();
  runs.stop();
  await noop.close();
  await env.stop();
  await eventing?.stop();
  await serving.stop();
  await env.cluster.stop();
}
