// Small fixture builders for the core's plain data, plus a fold that applies a decision's actions
// to the observation the way the shell would (status writes, label and annotation changes).
import type { ExecutionContext } from 'ava';
import type {
  ContainerImage,
  ContributionKind,
  FailurePolicy,
  PrestartHook,
  PrestartHookSpec,
  PrestartRunView,
  Reply,
  RevisionView,
} from '../../../../api/types.ts';
import { CANCEL_FINALIZER, HOLD_LABEL, HOOKS_ANNOTATION, INJECT_LABEL, REASON_ANNOTATION } from '../../../../api/types.ts';
import { decide } from '../../../../gate/core/decide.ts';
import { runStatusOf } from '../../../../gate/core/first-stage.ts';
import { applyReply } from '../../../../gate/core/reply.ts';
import { sendKey } from '../../../../gate/core/resend.ts';
import type { Action, Decision, Observed } from '../../../../gate/core/types.ts';

export const T0 = new Date('2025-01-01T00:00:00.000Z');
/** metadata.uid of the run `apply` creates; a test that re-creates the run gives it another. */
export const RUN_UID = 'run-uid-1';
export const at = (seconds: number): Date => new Date(T0.getTime() + seconds * 1000);

export function hook(name: string, spec: Partial<PrestartHookSpec> & { allowed?: ContributionKind[] } = {}): PrestartHook {
  const { allowed, ...rest } = spec;
  return {
    name,
    generation: 1,
    spec: {
      match: {},
      order: 0,
      timeout: '60s',
      failurePolicy: 'Fail' as FailurePolicy,
      resendInterval: '20s',
      delivery: { transport: 'http', url: `http://127.0.0.1:9/${name}` },
      ...(allowed ? { contributions: { allowed } } : {}),
      ...rest,
    },
  };
}

/** A Revision's containers once Knative resolved them (an image named by digest resolves to itself). */
export const CONTAINERS: ContainerImage[] = [
  { name: 'user-container', image: 'dev.local/hello@sha256:0000', digest: 'dev.local/hello@sha256:0000' },
];

export function revision(overrides: Partial<RevisionView> = {}): RevisionView {
  return {
    namespace: 'team-a',
    name: 'hello-00001',
    uid: 'uid-1',
    configuration: 'hello',
    service: 'hello',
    labels: {},
    annotations: {},
    images: ['dev.local/hello@sha256:0000'],
    containers: CONTAINERS,
    createdAt: T0,
    deleting: false,
    finalizers: [],
    ...overrides,
  };
}

/** A Revision as the stamping webhook leaves it when `names` apply. */
export function heldRevision(names: string[], overrides: Partial<RevisionView> = {}): RevisionView {
  return revision({
    labels: { [HOLD_LABEL]: 'true' },
    annotations: { [HOOKS_ANNOTATION]: JSON.stringify(names) },
    finalizers: [CANCEL_FINALIZER],
    ...overrides,
  });
}

export function observed(rev: RevisionView, hooks: PrestartHook[], overrides: Partial<Observed> = {}): Observed {
  return {
    revision: rev,
    hooks: new Map(hooks.map((h) => [h.name, h])),
    namedByTraffic: false,
    now: T0,
    ...overrides,
  };
}

/**
 * Applies the actions as the shell would. A send is remembered in Observed.sent at the
 * observation's time, as the leader remembers what it sent this term (gate/delivery/send-queue.ts);
 * events change nothing observable here.
 */
export function apply(o: Observed, actions: readonly Action[]): Observed {
  let revision = o.revision;
  let run = o.run;
  const sent = new Map(o.sent ?? []);
  for (const action of actions) {
    switch (action.type) {
      case 'createRun':
        // A started run's status is not stored yet (spec.startedAt implies it).
        run = { namespace: revision.namespace, name: revision.name, uid: RUN_UID, spec: action.spec };
        if (action.storeStatus) run.status = action.status;
        sent.clear();
        for (const r of action.requests) sent.set(sendKey(r.hook.name, r.attempt), o.now.getTime());
        break;
      case 'updateRunStatus':
        if (!run) throw new Error('updateRunStatus without a run');
        run = { ...run, status: action.status };
        break;
      case 'recordContainers':
        if (!run) throw new Error('recordContainers without a run');
        run = { ...run, spec: { ...run.spec, containers: action.containers } };
        break;
      case 'release': {
        const labels = { ...revision.labels };
        delete labels[HOLD_LABEL];
        if (action.inject) labels[INJECT_LABEL] = 'true';
        revision = { ...revision, labels, finalizers: revision.finalizers.filter((f) => f !== CANCEL_FINALIZER) };
        break;
      }
      case 'setHoldReason': {
        const annotations = { ...revision.annotations };
        if (action.reason === undefined) delete annotations[REASON_ANNOTATION];
        else annotations[REASON_ANNOTATION] = action.reason;
        revision = { ...revision, annotations };
        break;
      }
      case 'removeFinalizer':
        revision = { ...revision, finalizers: revision.finalizers.filter((f) => f !== CANCEL_FINALIZER) };
        break;
      case 'setRevisionCondition': {
        const others = (revision.conditions ?? []).filter((c) => c.type !== action.condition.type);
        revision = { ...revision, conditions: [...others, action.condition] };
        break;
      }
      case 'sendRequest':
        sent.set(sendKey(action.hook.name, action.attempt), o.now.getTime());
        break;
      case 'sendCancel':
      case 'recordEvent':
        break;
    }
  }
  const next = sent.size > 0 ? { ...o, revision, sent } : { ...o, revision };
  return run ? { ...next, run } : next;
}

export function ofType<T extends Action['type']>(d: Decision, type: T): Extract<Action, { type: T }>[] {
  return d.actions.filter((a): a is Extract<Action, { type: T }> => a.type === type);
}

export function types(d: Decision): string[] {
  return d.actions.map((a) => (a.type === 'recordEvent' ? `event:${a.eventType}:${a.reason}` : a.type));
}

export function hookPhases(o: Observed): Record<string, string> {
  return Object.fromEntries(((o.run && runStatusOf(o.run))?.hooks ?? []).map((h) => [h.name, h.phase]));
}

export function reply(run: PrestartRunView, hookName: string, overrides: Partial<Reply> = {}): Reply {
  const current = run.status?.hooks.find((h) => h.name === hookName);
  return {
    namespace: run.namespace,
    revision: run.name,
    revisionUID: run.spec.revisionUID,
    runUID: run.uid,
    hook: hookName,
    attempt: current?.attempt ?? 1,
    outcome: 'succeeded',
    eventKey: `test/${hookName}`,
    ...overrides,
  };
}

/** Writes a reply's status into the observation, as the sink's state update would. */
export function withStatus(o: Observed, status: NonNullable<PrestartRunView['status']>): Observed {
  if (!o.run) throw new Error('no run');
  return { ...o, run: { ...o.run, status } };
}

/** Applies a reply from `hookName` through applyReply and writes the resulting status, as the sink would. */
export function answer(o: Observed, hookName: string, overrides: Partial<Reply> = {}): Observed {
  if (!o.run) throw new Error('no run');
  const result = applyReply(o.run, reply(o.run, hookName, overrides), o.now);
  if (result.type !== 'applied' && result.type !== 'progress') throw new Error(`reply not applied: ${JSON.stringify(result)}`);
  return withStatus(o, result.status);
}

/** The started run's implied status stored, as decide() stores it a second after the create when no reply did (advanceRun's deferStartedStatus). */
export function storeStarted(o: Observed): Observed {
  if (!o.run || o.run.status) return o;
  return { ...o, run: { ...o.run, status: runStatusOf(o.run) } };
}

/** decide + apply at `now` (default: the observation's), asserting that deciding again on the applied state does nothing. */
export function step(t: ExecutionContext, o: Observed, now?: Date): { decision: Decision; next: Observed } {
  const current = now ? { ...o, now } : o;
  const decision = decide(current);
  const next = apply(current, decision.actions);
  t.deepEqual(decide(next).actions, [], 'deciding again on the applied state returns no actions');
  return { decision, next };
}
