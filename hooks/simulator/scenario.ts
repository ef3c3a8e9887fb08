// A made-up Revision held for one hook, taken through the gate's own core up to the moment it
// sends the request: the request the hook gets is the one the gate would build.
import { randomUUID } from 'node:crypto';
import {
  CANCEL_FINALIZER,
  type ContainerImage,
  type ContributionKind,
  HOLD_LABEL,
  HOOKS_ANNOTATION,
  type HookSnapshot,
  type PrestartHook,
  type PrestartRunView,
  type RevisionView,
} from '../../api/types.ts';
import { decide, type Observed } from '../../gate/core/index.ts';

export const DEMO_NAMESPACE = 'demo';
export const DEMO_REVISION = 'demo-00001';
export const DEMO_IMAGE = `registry.example/demo/app@sha256:${'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'}`;
/** The made-up Revision's one container, as Knative resolved it: the request names it (protocol version 2). */
export const DEMO_CONTAINERS: ContainerImage[] = [{ name: 'user-container', image: 'registry.example/demo/app:v1', digest: DEMO_IMAGE }];

export interface ScenarioOptions {
  hook: string;
  /** The hook's URL, as delivery.url of its PrestartHook. */
  url: string;
  params?: Record<string, unknown>;
  /** Extra annotations on the Revision. */
  annotations?: Record<string, string>;
  /** Contribution kinds the PrestartHook allows. Default all three. */
  allowed?: ContributionKind[];
  /** The PrestartHook's timeout. Default "10m". */
  timeout?: string;
  now?: Date;
}

export interface Scenario {
  observed: Observed;
  /** The run as the gate has written it when it sends the request. */
  run: PrestartRunView;
  send: { runUID: string | undefined; hook: HookSnapshot; attempt: number; deadline: string; containers: ContainerImage[] };
}

export function buildScenario(opts: ScenarioOptions): Scenario {
  const now = opts.now ?? new Date();
  const revision: RevisionView = {
    namespace: DEMO_NAMESPACE,
    name: DEMO_REVISION,
    uid: randomUUID(),
    service: 'demo',
    configuration: 'demo',
    labels: {
      'serving.knative.dev/service': 'demo',
      'serving.knative.dev/configuration': 'demo',
      'serving.knative.dev/configurationGeneration': '1',
      [HOLD_LABEL]: 'true',
    },
    annotations: { ...opts.annotations, [HOOKS_ANNOTATION]: JSON.stringify([opts.hook]) },
    images: ['registry.example/demo/app:v1'],
    containers: DEMO_CONTAINERS,
    createdAt: now,
    deleting: false,
    finalizers: [CANCEL_FINALIZER],
  };
  const hook: PrestartHook = {
    name: opts.hook,
    generation: 1,
    spec: {
      match: { annotation: { key: 'prestart.dev/demo' } },
      order: 0,
      timeout: opts.timeout ?? '10m',
      failurePolicy: 'Fail',
      resendInterval: '30s',
      ...(opts.params ? { params: opts.params } : {}),
      contributions: { allowed: opts.allowed ?? ['env', 'envFrom', 'volume'] },
      delivery: { transport: 'http', url: opts.url },
    },
  };
  const observed: Observed = { revision, hooks: new Map([[hook.name, hook]]), namedByTraffic: false, now };
  const actions = decide(observed).actions;
  const created = actions.find((a) => a.type === 'createRun');
  if (created?.type !== 'createRun') throw new Error(`the gate would not start a run: ${JSON.stringify(actions)}`);
  // The run is created with the request recorded; the gate sends it named by the new run's UID.
  const [request] = created.requests;
  if (!request) throw new Error(`the gate would not send a request: ${JSON.stringify(actions)}`);
  const run: PrestartRunView = {
    namespace: revision.namespace,
    name: revision.name,
    uid: randomUUID(),
    spec: created.spec,
    status: created.status,
  };
  return {
    observed: { ...observed, run },
    run,
    send: {
      runUID: run.uid,
      hook: request.hook,
      attempt: request.attempt,
      deadline: request.deadline,
      // What the gate recorded on the run, as it sends it; a gate core that does not record them yet: the Revision's.
      containers: run.spec.containers ?? DEMO_CONTAINERS,
    },
  };
}
