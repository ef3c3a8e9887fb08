// Which decisions count for an approval hook, and what they add up to: N approvals from the
// people its params allow (by username, group or ServiceAccount), among them every required
// approver, none from the Revision's author; one rejection from an allowed person fails it.
// Each person counts once, whichever of their groups lets them in. Pure.
import type { ParamReader } from '../common/params.ts';
import { CREATOR_ANNOTATION, type Decision, describeDecision } from './decision.ts';

export interface ApprovalRules {
  /** How many people must approve (params.approvals, default 1). */
  needed: number;
  /** Who may decide; all empty: anyone the approval policy lets write a decision. */
  users: string[];
  groups: string[];
  /** As usernames: system:serviceaccount:<namespace>:<name>. */
  serviceAccounts: string[];
  /** Usernames that must be among the approvals (they may decide even when not listed above). */
  required: string[];
}

const SA_PREFIX = 'system:serviceaccount:';

/** The rules in a PrestartHook's params; problems are added to `r`. */
export function readRules(r: ParamReader): ApprovalRules {
  const needed = r.int('approvals', { min: 1 }) ?? 1;
  const users = r.strings('approvers') ?? [];
  const groups = r.strings('approverGroups') ?? [];
  const serviceAccounts = serviceAccountNames(r, 'approverServiceAccounts');
  const required = [...(r.strings('requiredApprovers') ?? []), ...serviceAccountNames(r, 'requiredServiceAccounts')];
  const rules = { needed, users, groups, serviceAccounts, required: [...new Set(required)] };
  if (groups.length === 0 && (users.length > 0 || serviceAccounts.length > 0)) {
    const people = new Set([...users, ...serviceAccounts, ...rules.required]).size;
    if (people < needed)
      r.problem(`params.approvals is ${needed}, but only ${people} ${people === 1 ? 'person is' : 'people are'} allowed to approve`);
  }
  return rules;
}

function serviceAccountNames(r: ParamReader, key: string): string[] {
  const names: string[] = [];
  for (const entry of r.strings(key) ?? []) {
    const [namespace, name, ...rest] = entry.split('/');
    if (!namespace || !name || rest.length > 0) r.problem(`params.${key} must list namespace/name, got "${entry}"`);
    else names.push(`${SA_PREFIX}${namespace}:${name}`);
  }
  return names;
}

export interface Tally {
  outcome: 'approved' | 'rejected' | 'waiting';
  /** The approvals that count, earliest first. */
  approvals: Decision[];
  /** The rejection that failed it. */
  rejection?: Decision;
  /** Decisions that do not count, and why. */
  ignored: { decision: Decision; why: string }[];
  /** Required approvers who have not approved yet. */
  missing: string[];
  needed: number;
}

/** What the decisions on a Revision (earliest first) amount to for one hook. `author` is the Revision's creator, when known. */
export function tally(decisions: readonly Decision[], rules: ApprovalRules, author: string | undefined): Tally {
  const approvals: Decision[] = [];
  const ignored: Tally['ignored'] = [];
  let rejection: Decision | undefined;
  const seen = new Set<string>();
  for (const d of decisions) {
    if (seen.has(d.username)) {
      ignored.push({ decision: d, why: `${d.username} already decided` });
      continue;
    }
    seen.add(d.username);
    const why = notAllowed(d, rules);
    if (why) ignored.push({ decision: d, why });
    else if (d.verdict === 'rejected') rejection ??= d;
    else if (author !== undefined && d.username === author) {
      ignored.push({ decision: d, why: `${d.username} wrote this Revision (${CREATOR_ANNOTATION}), and its author may not approve it` });
    } else approvals.push(d);
  }
  const approvers = new Set(approvals.map((d) => d.username));
  const missing = rules.required.filter((u) => !approvers.has(u));
  const outcome = rejection ? 'rejected' : approvals.length >= rules.needed && missing.length === 0 ? 'approved' : 'waiting';
  const result: Tally = { outcome, approvals, ignored, missing, needed: rules.needed };
  if (rejection) result.rejection = rejection;
  return result;
}

/** Why `d` does not count under `rules`, or undefined when it does. */
function notAllowed(d: Decision, rules: ApprovalRules): string | undefined {
  const restricted = rules.users.length > 0 || rules.groups.length > 0 || rules.serviceAccounts.length > 0;
  if (!restricted || rules.required.includes(d.username)) return undefined;
  if (rules.users.includes(d.username) || rules.serviceAccounts.includes(d.username)) return undefined;
  if (d.groups.some((g) => rules.groups.includes(g))) return undefined;
  return `this hook counts only ${allowedText(rules)}`;
}

function allowedText(rules: ApprovalRules): string {
  const parts = [
    ...rules.users,
    ...rules.serviceAccounts,
    ...rules.required.filter((u) => !rules.users.includes(u) && !rules.serviceAccounts.includes(u)),
  ];
  if (rules.groups.length > 0) parts.push(`members of ${rules.groups.join(', ')}`);
  return parts.join(', ');
}

/** "1 of 2 approvals; still needs alice (required)", "2 of 2 approvals", or "3 approvals (2 needed)". */
export function countText(t: Tally): string {
  const more = Math.max(0, t.needed - t.approvals.length - t.missing.length);
  const needs = [...t.missing.map((u) => `${u} (required)`), ...(more > 0 ? [`${more} more`] : [])];
  const count =
    t.approvals.length > t.needed
      ? `${t.approvals.length} approvals (${t.needed} needed)`
      : `${t.approvals.length} of ${t.needed} approval${t.needed === 1 ? '' : 's'}`;
  return `${count}${needs.length > 0 ? `; still needs ${needs.join(' and ')}` : ''}`;
}

/** The hook's message for a tally: the count, then each decision that counts, then those that do not. */
export function tallyMessage(t: Tally): string {
  const parts: string[] = [];
  if (t.rejection) parts.push(describeDecision(t.rejection));
  parts.push(t.outcome === 'approved' && t.needed === 1 ? '' : countText(t));
  for (const d of t.approvals) parts.push(describeDecision(d));
  for (const { decision, why } of t.ignored) parts.push(`ignored: ${describeDecision(decision)} (${why})`);
  return parts.filter((p) => p !== '').join('; ');
}
