// A rollout Knative was refused while the gate could not stamp. Where the gate's webhook stamps new
// Revisions, a hooked Revision created while no replica answers is refused (the stamp policy, or
// the webhook itself while its caches are not synced), Knative marks its Configuration
// RevisionFailed and retries on its work queue's back-off: 5 ms doubling, so after an outage of a
// few minutes its next try may be many minutes away. Knative's configuration controller also
// reconciles a Configuration at once when one of its own Revisions changes, so the gate, once it
// can stamp, writes an annotation of its own on the Configuration's latest Revision: nothing a
// tenant writes, and nothing Knative's reconcilers read or set. A Configuration with no Revision yet
// (its very first one was refused) has nothing to write on and waits for Knative's retry.
import type { ConfigurationObject } from '../../api/resources.ts';

/** Written by the gate on a Revision to make Knative try its Configuration's refused create again now. */
export const RETRY_CREATE_ANNOTATION = 'prestart.dev/retry-create';

/** Knative's reason on a Configuration whose Revision create failed (MarkRevisionCreationFailed). */
const CREATION_FAILED = 'RevisionFailed';
/** Both the stamp policy's refusal and the webhook's "retry" answer say who refused. */
const REFUSED_BY_US = /knative-prestart/;

export type RetryTarget =
  | { kind: 'revision'; namespace: string; configuration: string; revision: string }
  | { kind: 'no-revision'; namespace: string; configuration: string };

/** The Revision to annotate so that Knative retries a create the gate refused, or undefined when nothing was refused. */
export function retryTarget(configuration: ConfigurationObject): RetryTarget | undefined {
  const ready = configuration.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'False' || ready.reason !== CREATION_FAILED || !REFUSED_BY_US.test(ready.message ?? '')) return undefined;
  const namespace = configuration.metadata?.namespace ?? '';
  const name = configuration.metadata?.name ?? '';
  const revision = configuration.status?.latestCreatedRevisionName;
  return revision
    ? { kind: 'revision', namespace, configuration: name, revision }
    : { kind: 'no-revision', namespace, configuration: name };
}
