// Who among a namespace's candidate subjects may do something there, asked of the apiserver's own
// authorizer (SubjectAccessReview), so aggregated and wildcard roles are judged as the apiserver
// judges them; and the Events that tell a finding. Shared by the leader's checks of Broker
// namespaces (Trigger create) and of hooked namespaces (a shell in their pods).
import { createHash } from 'node:crypto';
import {
  type AuthorizationV1Api,
  type CoreV1Api,
  PatchStrategy,
  type RbacAuthorizationV1Api,
  type RbacV1Subject,
  setHeaderOptions,
  type V1ObjectReference,
  type V1ResourceAttributes,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine, isConflict } from '../../api/kube-errors.ts';
import { FIELD_MANAGER } from '../../api/resources.ts';
import { EVENT_REASON_LABEL } from '../../api/types.ts';
import { type BindingView, type Candidate, coveredByOpenGroup, groupsFirst, type NamespaceVerdict } from '../core/broker-namespace.ts';

/**
 * The candidates allowed any of `attrs` in `namespace`, sorted by key. A candidate allowed only as
 * a member of a group already found open is left out (asked again without its groups), so a
 * finding names the binding to change rather than every member of a group.
 */
export async function openSubjects(
  authz: AuthorizationV1Api,
  namespace: string,
  candidates: readonly Candidate[],
  attrs: readonly Omit<V1ResourceAttributes, 'namespace'>[],
): Promise<Candidate[]> {
  const allowed = async (user: string, groups: readonly string[]) => {
    for (const a of attrs) {
      const review = await authz.createSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: { user, groups: [...groups], resourceAttributes: { ...a, namespace } },
        },
      });
      if (review.status?.allowed === true) return true;
    }
    return false;
  };
  const open: Candidate[] = [];
  for (const candidate of groupsFirst(candidates)) {
    if (!(await allowed(candidate.user, candidate.groups))) continue;
    if (coveredByOpenGroup(candidate, open) && !(await allowed(candidate.user, []))) continue;
    open.push(candidate);
  }
  return open.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

export interface WhoMayOptions {
  rbac: RbacAuthorizationV1Api;
  authz: AuthorizationV1Api;
  /** The subjects worth asking about in a namespace, from its RoleBindings and every ClusterRoleBinding. */
  candidates: (namespace: string, bindings: readonly BindingView[]) => Candidate[];
  attrs: readonly Omit<V1ResourceAttributes, 'namespace'>[];
  stopped: () => boolean;
  log: Logger;
  /** For the log: "create Triggers in a Broker's namespace". */
  doing: string;
}

/**
 * Who may do `attrs` in each namespace. A namespace that could not be checked gets the error
 * (logged; the checks report it as -1 and keep what they told); undefined once `stopped()`.
 */
export async function whoMayIn(namespaces: Iterable<string>, opts: WhoMayOptions): Promise<Map<string, NamespaceVerdict> | undefined> {
  const verdicts = new Map<string, NamespaceVerdict>();
  let clusterBindings: BindingView[] | undefined;
  const wanted = [...new Set(namespaces)];
  if (wanted.length === 0) return verdicts;
  try {
    clusterBindings = (await opts.rbac.listClusterRoleBinding()).items.map((b) => bindingView('ClusterRoleBinding', b));
  } catch (err) {
    opts.log.warn({ err: errorLine(err) }, 'could not list ClusterRoleBindings: every namespace is reported as -1 until the next check');
  }
  for (const namespace of wanted) {
    if (opts.stopped()) return undefined;
    if (!clusterBindings) {
      verdicts.set(namespace, { error: 'ClusterRoleBindings not listed' });
      continue;
    }
    try {
      const own = (await opts.rbac.listNamespacedRoleBinding({ namespace })).items.map((b) => bindingView('RoleBinding', b));
      const candidates = opts.candidates(namespace, [...own, ...clusterBindings]);
      verdicts.set(namespace, { open: await openSubjects(opts.authz, namespace, candidates, opts.attrs) });
    } catch (err) {
      verdicts.set(namespace, { error: errorLine(err) });
      opts.log.warn({ err: errorLine(err), namespace }, `could not check who may ${opts.doing}: reported as -1`);
    }
  }
  return opts.stopped() ? undefined : verdicts;
}

/** A binding reduced to whom it names. */
export function bindingView(
  kind: BindingView['kind'],
  b: { metadata?: { name?: string; namespace?: string }; subjects?: RbacV1Subject[] },
): BindingView {
  return {
    kind,
    name: b.metadata?.name ?? '',
    ...(b.metadata?.namespace ? { namespace: b.metadata.namespace } : {}),
    subjects: (b.subjects ?? []).map((s) => ({ kind: s.kind, name: s.name, ...(s.namespace ? { namespace: s.namespace } : {}) })),
  };
}

export interface FindingEvent {
  /** Where the Event lives: the object's namespace, or `default` for a cluster-scoped one (as client-go's recorder does). */
  namespace: string;
  involvedObject: V1ObjectReference & { name: string; uid?: string };
  type: 'Warning' | 'Normal';
  reason: string;
  message: string;
}

/**
 * Records `event`, named after the object and the finding: a second leader, or another gate,
 * telling the same thing meets the first one's Event (409) and moves its lastTimestamp instead of
 * adding a copy.
 */
export async function recordFinding(core: CoreV1Api, event: FindingEvent): Promise<void> {
  const now = new Date();
  const { namespace, involvedObject: obj } = event;
  const digest = createHash('sha256')
    .update(`${obj.uid ?? obj.name}\0${event.reason}\0${event.message}`)
    .digest('hex')
    .slice(0, 16);
  const name = `${obj.name.slice(0, 200)}.${digest}`;
  try {
    await core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { name, namespace, labels: { [EVENT_REASON_LABEL]: event.reason } },
        involvedObject: obj,
        type: event.type,
        reason: event.reason,
        message: event.message.slice(0, 1024),
        source: { component: FIELD_MANAGER },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  } catch (err) {
    // 409 AlreadyExists: the same finding was told before (another term, another gate): it is
    // told again now. A patch, since the gate may create and patch Events but not read them.
    if (!isConflict(err)) throw err;
    await core.patchNamespacedEvent(
      { namespace, name, body: { lastTimestamp: now } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

/**
 * Tells a finding: a log line at its level (`fields` say what it is about), then its Event.
 * Events are for people: one that cannot be recorded is logged, never retried into a loop.
 */
export async function tellFinding(core: CoreV1Api, log: Logger, event: FindingEvent, fields: Record<string, string>): Promise<void> {
  if (event.type === 'Warning') log.warn(fields, event.message);
  else log.info(fields, event.message);
  await recordFinding(core, event).catch((err: unknown) =>
    log.warn({ ...fields, err: errorLine(err), reason: event.reason }, 'could not record event'),
  );
}
