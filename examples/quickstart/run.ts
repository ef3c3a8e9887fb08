// Phases 2 to 5 of the quickstart (see main.ts): a control plane of its own, Knative Serving, the
// project's manifests, the gate and the example hook, then the demo with its live view.
import { join } from 'node:path';
import { controlPlaneBinaries, pinnedVersions } from '@knative-prestart/devcluster/binaries.ts';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { GATE_USER } from '@knative-prestart/devcluster/gate/env.ts';
import type { RealNode } from '@knative-prestart/devcluster/node.ts';
import type { RunningGate } from '../../gate/gate.ts';
import { askTheApp } from './answer.ts';
import { createDemoService, DEMO, prepareDemo } from './demo.ts';
import { createLiveView } from './live.ts';
import { demoDone, type Milestones, nextMilestones, timeline, waitingFor } from './milestones.ts';
import {
  type Bus,
  installProject,
  type Serving,
  startBus,
  startDemoNode,
  startExampleHook,
  startGateHere,
  startQuickstartCluster,
  startServing,
} from './platform.ts';
import { keepAlive, QuickstartFailure, type Session } from './session.ts';
import { lookAround, type Phase, seconds } from './summary.ts';
import { viewLines } from './view.ts';
import { type DemoWatch, watchDemo } from './watch.ts';

/** Phases 2 to 5, once the binaries are there: control plane, Knative, gate and hook, the demo. */
export async function runDemo(session: Session): Promise<void> {
  const { out, c, opts } = session;
  const ok = c.green('✔');
  const versions = pinnedVersions();
  const progress = (prefix: string) => (line: string) => out.say(c.dim(`  ${prefix}: ${line}`));
  const took = (name: Phase) => seconds(session.phases.end(name));
  const step = session.step.bind(session);

  // Its phase started in main.ts, while this code loaded.
  const cluster = await step(
    () => 'the control plane to start',
    startQuickstartCluster(
      progress('cluster'),
      (dir) => {
        session.clusterDir = dir;
      },
      { kwokNodes: session.realNode ? 0 : 1 },
    ),
  );
  session.cluster = cluster;
  let node: RealNode | undefined;
  if (session.realNode) {
    node = await step(() => 'the real node to start', startDemoNode(cluster, progress('node')));
    const running = node;
    // Its pods stop with it (Knative's activator would wait out a 600 s grace period otherwise).
    session.onStop('the real node', () => running.stop(), { boundMs: 60_000 });
  }
  const loaded =
    session.codeLoadMs >= 1000 ? ` (${seconds(session.codeLoadMs)} of it loading the gate's and the Kubernetes client's code)` : '';
  const admin = cluster.kubeConfig;
  out.say(
    `${ok} control plane ready in ${took('control plane')}${loaded}: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and ` +
      (node
        ? `a real node (${node.name}: kubelet, containerd and runc, CNI bridge, kube-proxy, CoreDNS; ready in ${node.startSeconds.toFixed(1)}s)`
        : 'kwok (fake nodes whose pods become Ready without containers)') +
      `, Kubernetes ${versions.KUBERNETES_VERSION}, at ${cluster.apiserverUrl}`,
  );
  out.say(`  cluster directory: ${cluster.dir}`);

  const started = cluster;
  const serving: Serving = await session.phase('Knative', () =>
    step(() => 'Knative Serving to start', startServing(started, progress('knative'), node)),
  );
  session.onStop('Knative Serving', () => serving.stop());
  out.say(`${ok} Knative Serving ${versions.KNATIVE_SERVING_VERSION} ready in ${took('Knative')}: ${serving.how}`);
  out.say(
    `  ${c.yellow('stand-in')}: no networking layer (Istio, Kourier, Contour) runs here. The Ingress stand-in marks the Ingresses of ` +
      `namespace ${DEMO.namespace} Ready, as one would report, so the Route and Service can become Ready; ` +
      (node ? "requests reach the app through Knative's activator instead." : 'no traffic flows.'),
  );

  let bus: Bus | undefined;
  if (opts.broker) {
    const t0 = performance.now();
    bus = await step(() => 'Knative Eventing and the Broker to start', startBus(started, DEMO, progress('eventing')));
    const running = bus;
    session.onStop('Knative Eventing', () => running.eventing.stop());
    out.say(
      `${ok} Knative Eventing ${versions.KNATIVE_EVENTING_VERSION} ready in ${seconds(performance.now() - t0)}: its own Broker, Trigger, ` +
        `Subscription and InMemoryChannel reconcilers, the broker ingress and filter, and the channel dispatcher; ` +
        `Broker ${bus.broker.namespace}/${bus.broker.name} Ready (logs in ${bus.eventing.logsDir})`,
    );
    out.say(
      `  ${c.yellow('stand-in')}: no cluster DNS here. Knative's data plane and the gate reach *.svc.cluster.local names through a local ` +
        `proxy (${bus.eventing.proxyUrl}) that maps them to 127.0.0.1 ports; the channel dispatcher runs in a network namespace of its own.`,
    );
  }

  const gateLog = join(started.dir, 'gate.log');
  const hookLog = join(started.dir, 'hook.log');
  const { gate, hook } = await session.phase('gate', () =>
    step(
      () => 'the gate and the hook to start',
      (async () => {
        await installProject(admin);
        const gate: RunningGate = await startGateHere(started, gateLog, bus);
        session.onStop('the gate', () => gate.stop());
        const hook = await startExampleHook(DEMO.hook, opts.provisionMs, hookLog, admin, bus);
        session.onStop('the hook', () => hook.close());
        return { gate, hook };
      })(),
    ),
  );
  out.say(
    `${ok} gate ready in ${took('gate')}: config/100-*, 200-*, 300-* applied; the gate runs in this process, cluster-wide, as ${GATE_USER}; ` +
      `webhooks ${gate.webhookUrl} (registered by URL), replies to ${gate.sinkUrl}`,
  );
  out.say(
    `${ok} example hook examples/typescript-binding-hook at ${hook.url}: "provisions" a database in four steps ` +
      `(${seconds(opts.provisionMs)}), stores the credentials in a Secret, then binds it as env vars and a volume`,
  );

  session.phases.start('demo');
  await step(() => `PrestartHook ${DEMO.hook} to take effect`, prepareDemo(admin, DEMO, hook.url, bus?.broker));
  out.say(
    `${ok} PrestartHook ${DEMO.hook}: Revisions annotated serving-binding=${DEMO.hook} are held until the hook at ${hook.url} answers` +
      (bus
        ? `; requests go through Broker ${bus.broker.namespace}/${bus.broker.name}, the Trigger the gate created delivers them to the ` +
          `hook, and the hook's replies go to the Broker (K_SINK), whose reply Trigger brings them to the gate`
        : ' (direct HTTP; `--broker` for the hook bus on Knative Eventing)'),
  );

  let milestones: Milestones = {};
  let serviceCreatedAt = performance.now();
  let settle: { done(): void; failed(reason: string): void } | undefined;
  const outcome = new Promise<void>((resolve, reject) => {
    settle = { done: resolve, failed: (reason) => reject(new QuickstartFailure(reason)) };
  });
  // Awaited below; a failure seen before that (while the Service is being created) is not unhandled.
  outcome.catch(() => {});
  const live = createLiveView(out, c);
  let watch: DemoWatch | undefined;
  const render = () => {
    if (!watch) return;
    const elapsed = seconds(performance.now() - serviceCreatedAt);
    const state = demoDone(milestones) ? 'done' : `waiting for ${waitingFor(milestones, DEMO)}`;
    live.update(viewLines(watch.objects), `Namespace ${DEMO.namespace}, ${elapsed} after the Service was created: ${state}`);
  };
  watch = await watchDemo(admin, DEMO.namespace, () => {
    if (watch) milestones = nextMilestones(milestones, watch.objects, DEMO, performance.now());
    if (demoDone(milestones)) settle?.done();
    else if (milestones.failed) settle?.failed(milestones.failed);
    render();
  });
  const stopWatch = watch;
  session.onStop('the watches', () => stopWatch.stop());
  const clock = setInterval(render, 500);
  serviceCreatedAt = performance.now();
  await createDemoService(admin, DEMO, node?.images.testApp);
  out.say(
    `${ok} Service ${DEMO.service} created in namespace ${DEMO.namespace}, its template annotated serving-binding=${DEMO.hook}; ` +
      `what happens next, as it happens:`,
  );
  try {
    await step(() => waitingFor(milestones, DEMO), outcome);
  } finally {
    clearInterval(clock);
    render();
    live.switchToLog();
  }
  session.phases.end('demo');

  out.say(`${ok} demo complete: ${timeline(milestones, serviceCreatedAt)} (after the Service was created)`);
  if (node) {
    const answer = await step(() => "the app's answer through Knative's activator", askTheApp(admin, DEMO));
    out.say(`${ok} ${answer}`);
  }
  out.say(`phase times: ${session.phases.summary()}`);
  if (opts.exitWhenDone) {
    out.say('stopping everything (--exit-when-done)');
    return session.finish(0);
  }
  out.block(showLookAround(started, serving, bus).join('\n'));
  out.say(`Changes in namespace ${DEMO.namespace} from now on are logged below. Ctrl-C stops everything.`);
  keepAlive();
}

/** How to look around in a running quickstart cluster; `serving` is undefined when Knative did not start. */
export function showLookAround(cl: Cluster, serving?: Serving, bus?: Bus): string[] {
  return lookAround({
    kubeconfig: cl.kubeconfigPath,
    kubectl: controlPlaneBinaries().kubectl,
    clusterDir: cl.dir,
    namespace: DEMO.namespace,
    service: DEMO.service,
    revision: DEMO.revision,
    hook: DEMO.hook,
    logs: [
      join(cl.dir, 'gate.log'),
      join(cl.dir, 'hook.log'),
      ...(serving?.logs ?? []),
      ...(bus ? [join(bus.eventing.logsDir, '*.log')] : []),
      join(cl.dir, '*.log'),
    ],
    broker: bus !== undefined,
  });
}
