// Whose Trigger could read a Broker's requests, the pure part: which subjects
// to ask the apiserver about, and what to report from its answers.
//
// Whoever may create a Trigger in a Broker's namespace can subscribe to
// `revision.prestart.requested`, read every request that Broker carries with its correlation id,
// and answer "succeeded" to the gate's sink: an id is all a reply needs for a hook that declares no
// sender identity (docs/brokers.md §5). The gate cannot tell a tenant from an operator among the
// Users and Groups a namespace binds, but some subjects are never the namespace's own: everyone (system:authenticated,
// system:unauthenticated), every ServiceAccount (system:serviceaccounts), and the ServiceAccounts
// of other namespaces. Those named in the namespace's RoleBindings or in any ClusterRoleBinding
// are the candidates; the shell asks the apiserver's authorizer about each one (a
// SubjectAccessReview), so aggregated and wildcard roles are judged by the authorizer itself.
import type { PrestartHook } from '../../api/types.ts';

export const REASON_OPEN = 'BrokerNamespaceOpen';
export const REASON_CLOSED = 'BrokerNamespaceClosed';
export const DOCS_SECTION = `docs/brokers.md, "Who must not edit the Broker's namespace"`;
/** The request the authorizer is asked about for each candidate, in the Broker's namespace. */
export const TRIGGER_CREATE = { verb: 'create', group: 'eventing.knative.dev', resource: 'triggers' } as const;
/** Subjects listed by name in one Event; the rest are counted. */
const LISTED_SUBJECTS = 6;

/**
 * Namespaces whose ServiceAccounts are never reported, besides the Broker's own: Knative
 * Eventing's (its controller keeps Triggers in every namespace, and its broker data plane sees
 * every event anyway) and the control plane's. They, and the gate's namespace, must have no
 * tenant editors whatever this check says (docs/brokers.md).
 */
export const PLATFORM_NAMESPACES = ['knative-eventing', 'kube-system'] as const;

export interface BindingSubject {
  kind: string;
  name: string;
  namespace?: string;
}

/** A RoleBinding (with its namespace) or a ClusterRoleBinding (without): only who it names matters here. */
export interface BindingView {
  kind: 'RoleBinding' | 'ClusterRoleBinding';
  name: string;
  namespace?: string;
  subjects: readonly BindingSubject[];
}

/** A subject from outside the namespace, and the identity a SubjectAccessReview asks about for it. */
export interface Candidate {
  kind: 'Group' | 'ServiceAccount' | 'User';
  /** Stable and unique: `Group system:authenticated`, `ServiceAccount tools/ci`, `User system:anonymous`. */
  key: string;
  user: string;
  groups: readonly string[];
  /** The bindings that name it, for the fix: `RoleBinding shop/ci-edit`, `ClusterRoleBinding ci-admin`. */
  namedIn: readonly string[];
}

export interface BrokerRef {
  namespace: string;
  name: string;
}

export interface HookRef {
  name: string;
  uid: string;
}

/** A Broker some PrestartHooks deliver through, and those hooks. */
export interface BrokerUse extends BrokerRef {
  hooks: readonly HookRef[];
}

/** What the authorizer said for one namespace: the candidates it allows, or why it could not be asked. */
export type NamespaceVerdict = { open: readonly Candidate[] } | { error: string };

export interface BrokerGauge extends BrokerRef {
  /** Open subjects; 0: none; -1: the last check of this namespace failed. */
  value: number;
}

export interface HookEvent {
  hook: HookRef;
  broker: BrokerRef;
  type: 'Warning' | 'Normal';
  reason: typeof REASON_OPEN | typeof REASON_CLOSED;
  message: string;
}

export interface BrokerReport {
  gauges: BrokerGauge[];
  events: HookEvent[];
  /** What the hooks were last told, per hook and Broker (memoryKey): the `last` of the next report. */
  told: Map<string, string>;
}

const SA_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;
const SA_NAMESPACE_GROUP = /^system:serviceaccounts:([^:]+)$/;
const BROAD_GROUPS = new Set(['system:authenticated', 'system:unauthenticated', 'system:serviceaccounts']);
/** The user a group's SubjectAccessReview names: bound by nobody, so only the group's grants count. */
export const GROUP_PROBE_USER = 'knative-prestart:broker-namespace-check';

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const keyOf = (b: BrokerRef) => `${b.namespace}/${b.name}`;
export const memoryKey = (hook: HookRef, broker: BrokerRef) => `${hook.uid}\0${keyOf(broker)}`;

/** The Brokers that hooks with transport broker deliver through (in `scope`, when given), sorted. */
export function brokersInUse(hooks: readonly (PrestartHook & { uid: string })[], scope?: readonly string[]): BrokerUse[] {
  const inScope = scope ? new Set(scope) : undefined;
  const byBroker = new Map<string, { namespace: string; name: string; hooks: HookRef[] }>();
  for (const hook of hooks) {
    const broker = hook.spec.delivery.transport === 'broker' ? hook.spec.delivery.broker : undefined;
    if (!broker || (inScope && !inScope.has(broker.namespace))) continue;
    const key = keyOf(broker);
    const use = byBroker.get(key) ?? { namespace: broker.namespace, name: broker.name, hooks: [] };
    use.hooks.push({ name: hook.name, uid: hook.uid });
    byBroker.set(key, use);
  }
  return [...byBroker.values()]
    .map((b) => ({ ...b, hooks: b.hooks.sort((x, y) => compare(x.name, y.name)) }))
    .sort((a, b) => compare(keyOf(a), keyOf(b)));
}

function serviceAccount(namespace: string, name: string): Omit<Candidate, 'namedIn'> {
  return {
    kind: 'ServiceAccount',
    key: `ServiceAccount ${namespace}/${name}`,
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

/** The candidate a binding's subject stands for, or undefined when it may be the namespace's own. */
function candidateOf(subject: BindingSubject, binding: BindingView, trusted: ReadonlySet<string>): Omit<Candidate, 'namedIn'> | undefined {
  if (subject.kind === 'ServiceAccount') {
    // A RoleBinding's ServiceAccount without a namespace is one of the binding's own namespace.
    const namespace = subject.namespace || binding.namespace;
    return namespace && !trusted.has(namespace) ? serviceAccount(namespace, subject.name) : undefined;
  }
  if (subject.kind === 'Group') {
    const ns = SA_NAMESPACE_GROUP.exec(subject.name)?.[1];
    if (BROAD_GROUPS.has(subject.name) || (ns !== undefined && !trusted.has(ns)))
      return { kind: 'Group', key: `Group ${subject.name}`, user: GROUP_PROBE_USER, groups: [subject.name] };
    return undefined;
  }
  if (subject.kind === 'User') {
    // A ServiceAccount named as a User is the same identity.
    const sa = SA_USER.exec(subject.name);
    if (sa) return trusted.has(sa[1] as string) ? undefined : serviceAccount(sa[1] as string, sa[2] as string);
    if (subject.name === 'system:anonymous')
      return { kind: 'User', key: 'User system:anonymous', user: 'system:anonymous', groups: ['system:unauthenticated'] };
  }
  return undefined;
}

/**
 * The subjects to ask about for a Broker in `namespace`: those named in that namespace's
 * RoleBindings and in ClusterRoleBindings that are not the namespace's own (nor of a `trusted`
 * namespace: the gate's, PLATFORM_NAMESPACES), deduplicated, sorted by key. Users and Groups of
 * other names are left out: who they are, the gate cannot tell.
 */
export function candidateSubjects(namespace: string, bindings: readonly BindingView[], trustedNamespaces: readonly string[]): Candidate[] {
  const trusted = new Set([namespace, ...trustedNamespaces]);
  const found = new Map<string, Omit<Candidate, 'namedIn'> & { namedIn: string[] }>();
  for (const binding of bindings) {
    if (binding.kind === 'RoleBinding' && binding.namespace !== namespace) continue;
    const where =
      binding.kind === 'RoleBinding' ? `RoleBinding ${binding.namespace}/${binding.name}` : `ClusterRoleBinding ${binding.name}`;
    for (const subject of binding.subjects) {
      const candidate = candidateOf(subject, binding, trusted);
      if (!candidate) continue;
      const entry = found.get(candidate.key) ?? { ...candidate, namedIn: [] };
      if (!entry.namedIn.includes(where)) entry.namedIn.push(where);
      found.set(candidate.key, entry);
    }
  }
  return [...found.values()].map((c) => ({ ...c, namedIn: [...c.namedIn].sort(compare) })).sort((a, b) => compare(a.key, b.key));
}

/**
 * Whether an allowed ServiceAccount (or system:anonymous) may be so only as a member of a group
 * already found open: then it is listed only if it is allowed by itself too (asked again without
 * its groups), so a finding names the binding to remove instead of every ServiceAccount any
 * ClusterRoleBinding names. Ask the Groups first, then the rest.
 */
export function coveredByOpenGroup(candidate: Candidate, open: readonly Candidate[]): boolean {
  if (candidate.kind === 'Group') return false;
  const openGroups = new Set(open.filter((c) => c.kind === 'Group').flatMap((c) => c.groups));
  return candidate.groups.some((g) => openGroups.has(g));
}

/** The order to ask in: Groups first (coveredByOpenGroup reads their answers). */
export const groupsFirst = (candidates: readonly Candidate[]): Candidate[] =>
  [...candidates].sort((a, b) => Number(b.kind === 'Group') - Number(a.kind === 'Group') || compare(a.key, b.key));

/** The Warning's text: the Broker, who is open and where they are named, the harm, the fix. */
export function openMessage(broker: BrokerRef, open: readonly Candidate[]): string {
  const listed = open.slice(0, LISTED_SUBJECTS).map((c) => `${c.key} (named in ${c.namedIn.join(', ')})`);
  if (open.length > LISTED_SUBJECTS) listed.push(`and ${open.length - LISTED_SUBJECTS} more`);
  const who = open.length === 1 ? '1 subject from outside the namespace' : `${open.length} subjects from outside the namespace`;
  return (
    `Broker ${keyOf(broker)} is open: ${who} may create Triggers in ${broker.namespace}: ${listed.join('; ')}. ` +
    'Such a Trigger receives every revision.prestart.requested this Broker carries with its correlation id, ' +
    'and whoever reads a request can answer it "succeeded" to the gate. ' +
    `Take Trigger create in ${broker.namespace} away from them (in the binding named whose role grants it), or move the Broker to a namespace without tenant editors; ` +
    `or turn on sender identity and EventPolicies (docs/brokers.md §5). See ${DOCS_SECTION}.`
  );
}

export function closedMessage(broker: BrokerRef): string {
  return `Broker ${keyOf(broker)} is no longer open: no subject from outside namespace ${broker.namespace} may create Triggers there.`;
}

/** What the hooks are told: the open subjects' keys, '' when none. A change of this is a new Event. */
const fingerprint = (open: readonly Candidate[]) => open.map((c) => c.key).join('\n');

/**
 * The gauges and the Events of one pass. `last` is the previous report's `told`: an Event goes to
 * each hook of a Broker whose finding appeared or changed (Warning), or went away (Normal), never
 * again for the same finding. A namespace whose check failed reports -1 and leaves what its hooks
 * were told as it was.
 */
export function brokerReport(
  uses: readonly BrokerUse[],
  verdicts: ReadonlyMap<string, NamespaceVerdict>,
  last: ReadonlyMap<string, string>,
): BrokerReport {
  const report: BrokerReport = { gauges: [], events: [], told: new Map() };
  for (const use of uses) {
    const broker = { namespace: use.namespace, name: use.name };
    const verdict = verdicts.get(use.namespace) ?? { error: 'not checked' };
    if ('error' in verdict) {
      report.gauges.push({ ...broker, value: -1 });
      for (const hook of use.hooks) {
        const before = last.get(memoryKey(hook, broker));
        if (before !== undefined) report.told.set(memoryKey(hook, broker), before);
      }
      continue;
    }
    report.gauges.push({ ...broker, value: verdict.open.length });
    const now = fingerprint(verdict.open);
    for (const hook of use.hooks) {
      const key = memoryKey(hook, broker);
      const before = last.get(key) ?? '';
      report.told.set(key, now);
      if (now === before) continue;
      report.events.push(
        now === ''
          ? { hook, broker, type: 'Normal', reason: REASON_CLOSED, message: closedMessage(broker) }
          : { hook, broker, type: 'Warning', reason: REASON_OPEN, message: openMessage(broker, verdict.open) },
      );
    }
  }
  return report;
}
