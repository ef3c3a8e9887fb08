// One Kubernetes Event on the Revision for each decision the hook counts or ignores, written as
// the hook's own identity (the approver's client could write any Event it likes). Its name is
// derived from the hook and the decision, so a hook restarted, or a request redelivered, finds it
// already there (409) instead of telling the same decision twice.
import { createHash } from 'node:crypto';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine, statusOf } from '../common/kube.ts';
import { type Decision, describeDecision } from './decision.ts';

export interface DecisionEvent {
  revision: { namespace: string; name: string; uid: string };
  hook: string;
  decision: Decision;
  /** What the decision means for this hook ("1 of 2 approvals; still needs alice (required)"). */
  effect: string;
}

export function decisionEventRecorder(kc: KubeConfig, logger: Logger | undefined): (e: DecisionEvent) => Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  return async ({ revision, hook, decision, effect }) => {
    const digest = createHash('sha256').update(`${hook}\n${decision.id}\n${decision.verdict}`).digest('hex').slice(0, 16);
    const now = new Date();
    try {
      await core.createNamespacedEvent({
        namespace: revision.namespace,
        body: {
          metadata: { name: `${revision.name}.approval-${digest}`, namespace: revision.namespace },
          involvedObject: { apiVersion: 'serving.knative.dev/v1', kind: 'Revision', ...revision },
          type: decision.verdict === 'approved' ? 'Normal' : 'Warning',
          reason: decision.verdict === 'approved' ? 'Approved' : 'Rejected',
          message: `${describeDecision(decision)} (hook ${hook}: ${effect})`.slice(0, 1024),
          source: { component: 'prestart-hook-approval' },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    } catch (err) {
      // The record in the PrestartRun does not depend on it: an install without the grant still works.
      if (statusOf(err) !== 409)
        logger?.warn({ err: errorLine(err), revision: `${revision.namespace}/${revision.name}` }, 'cannot record the decision as an Event');
    }
  };
}
