// Who may open a shell in the pods of a hooked namespace, the pure part: which subjects to ask the
// apiserver about, and what to report from its answers.
//
// `kubectl exec` and `attach` are CONNECT requests on a pod's subresources: no admission policy
// sees the pod they reach, so a subject allowed them in a namespace whose Revisions are held by
// hooks can run, in a released Revision's pod, what no hook was asked about (docs/design.md, "What
// the policies cannot see"). The gate cannot take the right away; it tells. The candidates are the
// subjects the namespace's RoleBindings name (its tenants: Users, Groups, ServiceAccounts) and
// those that are not the namespace's own anywhere (everyone, every ServiceAccount, another
// namespace's ServiceAccounts: candidateSubjects). Users and Groups that only ClusterRoleBindings
// name are the cluster's admins and controllers: not asked about.
import {
  type BindingSubject,
  type BindingView,
  type Candidate,
  candidateSubjects,
  GROUP_PROBE_USER,
  type NamespaceVerdict,
} from './broker-namespace.ts';

export const REASON_SHELL_OPEN = 'PodShellOpen';
export const REASON_SHELL_CLOSED = 'PodShellClosed';
export const SHELL_DOCS = `docs/operations.md, "What the admission policies cannot see"`;
/** What the authorizer is asked for each candidate, in the namespace: either is a shell in a pod. */
export const POD_SHELL = [
  { verb: 'create', group: '', resource: 'pods', subresource: 'exec' },
  { verb: 'create', group: '', resource: 'pods', subresource: 'attach' },
] as const;
/** Subjects listed by name in one Event; the rest are counted. */
const LISTED_SUBJECTS = 6;
const SA_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The namespaces whose Revisions hooks hold or held: those of the PrestartRuns, sorted. */
export function hookedNamespaces(runNamespaces: Iterable<string>): string[] {
  return [...new Set(runNamespaces)].sort(compare);
}

function tenantOf(subject: BindingSubject, bindingNamespace: string, trusted: ReadonlySet<string>): Omit<Candidate, 'namedIn'> | undefined {
  const sa = (namespace: string, name: string): Omit<Candidate, 'namedIn'> | undefined =>
    trusted.has(namespace)
      ? undefined
      : {
          kind: 'ServiceAccount',
          key: `ServiceAccount ${namespace}/${name}`,
          user: `system:serviceaccount:${namespace}:${name}`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
        };
  if (subject.kind === 'ServiceAccount') return sa(subject.namespace || bindingNamespace, subject.name);
  if (subject.kind === 'Group') return { kind: 'Group', key: `Group ${subject.name}`, user: GROUP_PROBE_USER, groups: [subject.name] };
  if (subject.kind === 'User') {
    const named = SA_USER.exec(subject.name);
    if (named) return sa(named[1] as string, named[2] as string);
    return { kind: 'User', key: `User ${subject.name}`, user: subject.name, groups: ['system:authenticated'] };
  }
  return undefined;
}

/**
 * The subjects to ask about for `namespace`: everyone its RoleBindings name (but ServiceAccounts
 * of `trustedNamespaces`: the gate's, the platform's), and the outsiders candidateSubjects finds
 * in any binding; deduplicated, sorted by key.
 */
export function shellCandidates(namespace: string, bindings: readonly BindingView[], trustedNamespaces: readonly string[]): Candidate[] {
  const trusted = new Set(trustedNamespaces);
  const found = new Map<string, Omit<Candidate, 'namedIn'> & { namedIn: string[] }>();
  const add = (candidate: Omit<Candidate, 'namedIn'>, where: readonly string[]) => {
    const entry = found.get(candidate.key) ?? { ...candidate, namedIn: [] };
    for (const w of where) if (!entry.namedIn.includes(w)) entry.namedIn.push(w);
    found.set(candidate.key, entry);
  };
  for (const binding of bindings) {
    if (binding.kind !== 'RoleBinding' || binding.namespace !== namespace) continue;
    for (const subject of binding.subjects) {
      const candidate = tenantOf(subject, namespace, trusted);
      if (candidate) add(candidate, [`RoleBinding ${namespace}/${binding.name}`]);
    }
  }
  for (const outsider of candidateSubjects(namespace, bindings, trustedNamespaces)) add(outsider, outsider.namedIn);
  return [...found.values()].map((c) => ({ ...c, namedIn: [...c.namedIn].sort(compare) })).sort((a, b) => compare(a.key, b.key));
}

export interface ShellGauge {
  namespace: string;
  /** Subjects that may exec or attach; -1: the last check failed. */
  value: number;
}

export interface ShellEvent {
  namespace: string;
  type: 'Warning' | 'Normal';
  reason: string;
  message: string;
}

export interface ShellReport {
  gauges: ShellGauge[];
  events: ShellEvent[];
  /** What each namespace has been told (the open subjects' keys): the next pass's `last`. */
  told: Map<string, string>;
}

export function openShellMessage(namespace: string, open: readonly Candidate[]): string {
  const listed = open.slice(0, LISTED_SUBJECTS).map((c) => `${c.key} (named in ${c.namedIn.join(', ')})`);
  if (open.length > LISTED_SUBJECTS) listed.push(`and ${open.length - LISTED_SUBJECTS} more`);
  const who = open.length === 1 ? '1 subject' : `${open.length} subjects`;
  return (
    `Namespace ${namespace} has Revisions under pre-start hooks, and ${who} may exec or attach into its pods: ${listed.join('; ')}. ` +
    "A shell in a released Revision's pod runs what no hook was asked about, and no admission policy sees it. " +
    `Where hooks are a control, take pods/exec and pods/attach from them (in the binding named whose role grants it). See ${SHELL_DOCS}.`
  );
}

export function closedShellMessage(namespace: string): string {
  return `Namespace ${namespace}: no subject its bindings name may exec or attach into its pods any more.`;
}

/**
 * The gauges and Events of one pass. `last` is the previous report's `told`: a namespace gets a
 * Warning when its finding appears or changes, a Normal when it goes away, never the same twice.
 * A namespace whose check failed reports -1 and keeps what it was told.
 */
export function shellReport(
  namespaces: readonly string[],
  verdicts: ReadonlyMap<string, NamespaceVerdict>,
  last: ReadonlyMap<string, string>,
): ShellReport {
  const report: ShellReport = { gauges: [], events: [], told: new Map() };
  for (const namespace of namespaces) {
    const verdict = verdicts.get(namespace) ?? { error: 'not checked' };
    if ('error' in verdict) {
      report.gauges.push({ namespace, value: -1 });
      const before = last.get(namespace);
      if (before !== undefined) report.told.set(namespace, before);
      continue;
    }
    report.gauges.push({ namespace, value: verdict.open.length });
    const now = verdict.open.map((c) => c.key).join('\n');
    const before = last.get(namespace) ?? '';
    report.told.set(namespace, now);
    if (now === before) continue;
    report.events.push(
      now === ''
        ? { namespace, type: 'Normal', reason: REASON_SHELL_CLOSED, message: closedShellMessage(namespace) }
        : { namespace, type: 'Warning', reason: REASON_SHELL_OPEN, message: openShellMessage(namespace, verdict.open) },
    );
  }
  return report;
}
