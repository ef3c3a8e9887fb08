// Applies the core's actions, in order. The first failure stops the list (the caller requeues
// with backoff and the core decides again from what really got written), so "record, then send"
// holds: a request is never sent unless the status that records it was stored.
//
// Invariant: while a list is applied, only its own actions write the run, from ctx.run. What a
// send brings back (a hook's synchronous reply, a refusal) also writes the run, so it is kept
// aside and handed to the intake only after the list is done, whether the list finished or
// stopped on an error: nothing in the list ever works from a run that changed behind its back.
import type { Logger } from 'pino';
import type { RunObject } from '../../api/resources.ts';
import type { HookSnapshot, RevisionView } from '../../api/types.ts';
import { CANCEL_FINALIZER, HOLD_LABEL, INJECT_LABEL, REASON_ANNOTATION } from '../../api/types.ts';
import type { Intake } from '../../sinks/intake.ts';
import { requestRef } from '../core/index.ts';
import type { Action } from '../core/types.ts';
import { type Answer, takeAnswers } from './answers.ts';
import type { Clock } from './clock.ts';
import { crashPoint } from './crashpoints.ts';
import type { KubeClient } from './kube-client.ts';
import type { RequestSender } from './requests.ts';

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
}

export async function applyActions(actions: Action[], ctx: ApplyContext): Promise<void> {
  const answers: Answer[] = [];
  try {
    for (const action of actions) await applyOne(action, ctx, answers);
  } finally {
    await takeAnswers(answers, ctx.intake, ctx.log);
  }
}

async function applyOne(action: Action, ctx: ApplyContext, answers: Answer[]): Promise<void> {
  const { client, revision } = ctx;
  switch (action.type) {
    case 'createRun':
      await client.createRun(revision, action.spec, action.status);
      return;
    case 'updateRunStatus':
      ctx.run = await client.replaceRunStatus(requireRun(ctx), action.status);
      return;
    case 'sendRequest': {
      const result = await ctx.sender.send(revision, action.hook, action.attempt, action.deadline, 'start');
      answers.push({ request: requestRef(revision, action.hook.name, action.attempt), result });
      crashPoint('after-send');
      return;
    }
    case 'sendCancel':
      await sendCancelBestEffort(ctx, action.hook, action.attempt, action.reason);
      return;
    case 'release':
      crashPoint('before-release');
      // Conditional on the resourceVersion we decided from, so a finalizer another party added
      // in between is never dropped; a 409 makes the core look again.
      await client.mergePatchRevision(revision.namespace, revision.name, {
        metadata: {
          resourceVersion: ctx.revisionResourceVersion,
          labels: { [HOLD_LABEL]: null, ...(action.inject ? { [INJECT_LABEL]: 'true' } : {}) },
          annotations: { [REASON_ANNOTATION]: null },
          finalizers: revision.finalizers.filter((f) => f !== CANCEL_FINALIZER),
        },
      });
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
    case 'recordEvent':
      // Events are for people; losing one must not stop the state machine.
      await client
        .recordEvent(revision, action.eventType, action.reason, action.message, ctx.clock.now())
        .catch((err: unknown) => ctx.log.warn({ err, reason: action.reason }, 'could not record event'));
      return;
  }
}

function requireRun(ctx: ApplyContext): RunObject {
  if (!ctx.run) throw new Error(`no PrestartRun cached for ${ctx.revision.namespace}/${ctx.revision.name} yet`);
  return ctx.run;
}

/** A cancel is a courtesy to the hook: the Revision is going away whether or not it arrives. */
async function sendCancelBestEffort(ctx: ApplyContext, hook: HookSnapshot, attempt: number, reason: string): Promise<void> {
  try {
    const result = await ctx.sender.send(ctx.revision, hook, attempt, ctx.clock.now().toISOString(), 'cancel', reason);
    if (result.type === 'undelivered')
      ctx.log.warn({ hook: hook.name, err: result.reason }, 'could not tell the hook its request was cancelled');
  } catch (err) {
    ctx.log.warn({ err, hook: hook.name }, 'could not tell the hook its request was cancelled');
  }
}
