// Applies the core's actions, in order. The first failure stops the list (the caller requeues
// with backoff and the core decides again from what really got written), so "record, then send"
// holds: a request is never sent unless what records it was stored (a new run's first requests
// go out once its create, whose spec.startedAt records them, returned). Sends are queued
// (gate/delivery/send-queue.ts): the network send happens off the reconcile workers, so a hook that
// hangs holds its own send slots, never a worker. Events and the Revision's condition are written
// in the background too (gate/controller/background-writes.ts): nothing decided waits for them.
//
// A release ends the list: the label is off, the Revision starts, and what the core put after it
// (the run's Released status, the event) is the next reconcile's, decide's finishInterruptedRelease ("finish an
// interrupted release"), which the Revision's leaving the held cache triggers. A worker then
// spends one write per release, so releases that come together do not queue behind each
// other's bookkeeping.
//
// Invariant: while a list is applied, only its own actions write the run, from ctx.run. What a
// send brings back (a hook's synchronous reply, a refusal) also writes the run, so the sender
// hands it to the intake under the Revision's lock, which the list holds while it is applied:
// nothing in the list ever works from a run that changed behind its back.
import type { Logger } from 'pino';
import type { RunObject } from '../../api/resources.ts';
import type { RevisionView } from '../../api/types.ts';
import { CANCEL_FINALIZER, REASON_ANNOTATION } from '../../api/types.ts';
import type { Intake } from '../../sinks/intake.ts';
import { releaseOps } from '../core/release-patch.ts';
import type { Action } from '../core/types.ts';
import type { RequestSender } from '../delivery/request-sender.ts';
import type { HookSends } from '../delivery/send-queue.ts';
import { isFinished } from '../kube/cache-views.ts';
import type { KubeClient } from '../kube/kube-client.ts';
import type { Clock } from '../runtime/clock.ts';
import { crashPoint } from '../runtime/crashpoints.ts';
import type { BackgroundWrites } from './background-writes.ts';

/** What stays the same from one reconcile to the next. */
export interface ApplyDeps {
  client: KubeClient;
  sender: RequestSender;
  /** Where synchronous answers go: the same intake as the sinks'. */
  intake: Intake;
  clock: Clock;
}

export interface ApplyContext extends ApplyDeps {
  revision: RevisionView;
  /** The Revision's resourceVersion the decision was made from; finalizer writes are conditional on it. */
  revisionResourceVersion: string | undefined;
  run: RunObject | undefined;
  log: Logger;
  /** The sends queue (built on `sender` and `intake`) and the Revision's lock. */
  sends: HookSends;
  /** Events and the Revision's condition, written off the worker. */
  background: BackgroundWrites;
  /** Look at this Revision again (a background write failed). */
  retry: () => void;
  /** Set by a release: the resourceVersion of the released Revision. */
  releasedAs?: string;
}

/** All of the list was applied, or the list up to its release (the rest is finishInterruptedRelease's, next). */
export type Applied = 'all' | 'released';

export async function applyActions(actions: Action[], ctx: ApplyContext): Promise<Applied> {
  return ctx.sends.exclusive(ctx.revision, async () => {
    for (const [i, action] of actions.entries()) {
      await applyOne(action, ctx);
      if (action.type === 'release' && i < actions.length - 1) return 'released';
    }
    return 'all';
  });
}

async function applyOne(action: Action, ctx: ApplyContext): Promise<void> {
  const { client, revision } = ctx;
  switch (action.type) {
    case 'createRun': {
      // The run recording the first requests (spec.startedAt) is stored once this returns (a throw
      // sends none); only then is the UID they carry known.
      ctx.run = await client.createRun(revision, action.spec, action.storeStatus ? action.status : undefined);
      crashPoint('after-run-created');
      const at = ctx.clock.now().getTime();
      const { containers } = ctx.run.spec;
      for (const r of action.requests) ctx.sends.request(revision, ctx.run.metadata?.uid, r.hook, r.attempt, r.deadline, at, containers);
      return;
    }
    case 'updateRunStatus':
      ctx.run = await client.replaceRunStatus(requireRun(ctx), action.status);
      return;
    case 'recordContainers':
      ctx.run = await client.recordRunContainers(requireRun(ctx), action.containers);
      return;
    case 'sendRequest':
      // What the hook is asked about is what the run records (record, then send): its spec.containers.
      ctx.sends.request(
        revision,
        action.runUID,
        action.hook,
        action.attempt,
        action.deadline,
        ctx.clock.now().getTime(),
        ctx.run?.spec?.containers,
      );
      return;
    case 'sendCancel':
      // A cancel is a courtesy to the hook: the Revision is going away whether or not it arrives.
      ctx.sends.cancel(
        revision,
        action.runUID,
        action.hook,
        action.attempt,
        action.reason,
        ctx.clock.now().toISOString(),
        ctx.run?.spec?.containers,
      );
      return;
    case 'release':
      crashPoint('before-release');
      ctx.releasedAs = await client.jsonPatchRevision(
        revision.namespace,
        revision.name,
        releaseOps(revision, action.inject, action.containers),
      );
      crashPoint('after-release');
      return;
    case 'setHoldReason':
      await client.mergePatchRevision(revision.namespace, revision.name, {
        metadata: { annotations: { [REASON_ANNOTATION]: action.reason ?? null } },
      });
      return;
    case 'removeFinalizer':
      await client.mergePatchRevision(revision.namespace, revision.name, {
        metadata: {
          resourceVersion: ctx.revisionResourceVersion,
          finalizers: revision.finalizers.filter((f) => f !== CANCEL_FINALIZER),
        },
      });
      return;
    case 'setRevisionCondition': {
      // Knative sorts conditions by type and keeps the ones it does not manage. A
      // failed write (a status Knative wrote in between: 409) makes the core decide again.
      const { condition } = action;
      ctx.background.latest(`${revision.namespace}/${revision.name}`, () =>
        client.setRevisionCondition(revision.namespace, revision.name, condition).catch((err: unknown) => {
          ctx.log.debug({ err, revision: `${revision.namespace}/${revision.name}` }, 'could not write the condition; deciding again');
          ctx.retry();
        }),
      );
      return;
    }
    case 'recordEvent': {
      // Events are for people; losing one must not stop the state machine.
      const at = ctx.clock.now();
      ctx.background.event(() =>
        client
          .recordEvent(revision, action.eventType, action.reason, action.message, at)
          .catch((err: unknown) => ctx.log.warn({ err, reason: action.reason }, 'could not record event')),
      );
      return;
    }
  }
}

function requireRun(ctx: ApplyContext): RunObject {
  if (!ctx.run) throw new Error(`no PrestartRun cached for ${ctx.revision.namespace}/${ctx.revision.name} yet`);
  // A finished run is cached slim (cache-views.ts) and final: a status written from it would lose what it left out.
  if (isFinished(ctx.run))
    throw new Error(`PrestartRun ${ctx.revision.namespace}/${ctx.revision.name} is finished; its status is not written again`);
  return ctx.run;
}
