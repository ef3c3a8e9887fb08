// A decision is four annotations on the Revision, one set per person, written by `knative-prestart
// approve|reject`. The <id> only keeps one person's keys apart (the CLI takes it from a hash of the
// username); config/610-approval-policy.yaml makes the apiserver check every new set: the writer
// holds the approve grant, -by is their username and -groups their groups as it authenticated
// them, nobody decides twice, the Revision's author does not approve, and no decision changes
// once written. When it happened comes from managedFields, which the apiserver stamps: nothing
// the approver's client claims. Pure.
import { createHash } from 'node:crypto';
import type { V1ManagedFieldsEntry, V1ObjectMeta } from '@kubernetes/client-node';
import { APPROVAL_VERDICT_PREFIX } from '../../../api/types.ts';

export { APPROVAL_VERDICT_PREFIX };
export const APPROVAL_BY_PREFIX = 'prestart.dev/approval-by.';
export const APPROVAL_GROUPS_PREFIX = 'prestart.dev/approval-groups.';
export const APPROVAL_MESSAGE_PREFIX = 'prestart.dev/approval-message.';
/** Who Knative says wrote the Revision: the user who last changed its Service's (or Configuration's) spec. */
export const CREATOR_ANNOTATION = 'serving.knative.dev/creator';
export const VERDICTS = ['approved', 'rejected'] as const;
export type ApprovalVerdict = (typeof VERDICTS)[number];

/** A person as the apiserver authenticated them (SelfSubjectReview, or the policy's request.userInfo). */
export interface Approver {
  username: string;
  groups: string[];
}

export interface Decision extends Approver {
  /** Keeps this person's annotations apart from the others'. */
  id: string;
  verdict: ApprovalVerdict;
  /** RFC 3339, from managedFields; absent when the apiserver recorded none. */
  at?: string;
  message?: string;
}

/** The <id> of a person's annotations: 16 hex digits of the SHA-256 of their username. */
export function decisionId(username: string): string {
  return createHash('sha256').update(username).digest('hex').slice(0, 16);
}

/** The annotations that record `who`'s decision (a merge patch; a message of blanks is left out). */
export function decisionAnnotations(who: Approver, verdict: ApprovalVerdict, message?: string): Record<string, string> {
  const id = decisionId(who.username);
  const annotations: Record<string, string> = {
    [APPROVAL_VERDICT_PREFIX + id]: verdict,
    [APPROVAL_BY_PREFIX + id]: who.username,
    // One a line, as the policy compares them: a group name holds no line break.
    [APPROVAL_GROUPS_PREFIX + id]: who.groups.join('\n'),
  };
  if (message?.trim()) annotations[APPROVAL_MESSAGE_PREFIX + id] = message.trim();
  return annotations;
}

/** The decisions on a Revision, earliest first, and why any annotations do not make one. */
export function readDecisions(meta: V1ObjectMeta | undefined): { decisions: Decision[]; invalid: string[] } {
  const annotations = meta?.annotations ?? {};
  const decisions: Decision[] = [];
  const invalid: string[] = [];
  for (const [key, verdict] of Object.entries(annotations)) {
    if (!key.startsWith(APPROVAL_VERDICT_PREFIX)) continue;
    const id = key.slice(APPROVAL_VERDICT_PREFIX.length);
    if (!(VERDICTS as readonly string[]).includes(verdict)) {
      invalid.push(`${key} is "${verdict}", neither approved nor rejected`);
      continue;
    }
    const username = annotations[APPROVAL_BY_PREFIX + id];
    if (!username) {
      invalid.push(
        `${key} is set without ${APPROVAL_BY_PREFIX}${id}: decisions are only accepted through the policy of config/610-approval-policy.yaml, which records who`,
      );
      continue;
    }
    const groups = (annotations[APPROVAL_GROUPS_PREFIX + id] ?? '').split('\n').filter((g) => g !== '');
    const decision: Decision = { id, verdict: verdict as ApprovalVerdict, username, groups };
    const at = decidedAt(meta?.managedFields ?? [], key);
    if (at) decision.at = at;
    const message = annotations[APPROVAL_MESSAGE_PREFIX + id]?.trim();
    if (message) decision.message = message;
    decisions.push(decision);
  }
  decisions.sort((a, b) => (a.at ?? '\uffff').localeCompare(b.at ?? '\uffff') || a.username.localeCompare(b.username));
  return { decisions, invalid };
}

/** When `key` was last written: the time of the managedFields entry that owns it. */
export function decidedAt(entries: readonly V1ManagedFieldsEntry[], key: string): string | undefined {
  const field = `f:${key}`;
  const owner = entries.find((e) => {
    const fields = e.fieldsV1 as { 'f:metadata'?: { 'f:annotations'?: Record<string, unknown> } } | undefined;
    return fields?.['f:metadata']?.['f:annotations']?.[field] !== undefined;
  });
  const time = owner?.time as unknown;
  if (time instanceof Date) return time.toISOString();
  return typeof time === 'string' ? time : undefined;
}

/** "approved by alice (groups: sre, system:authenticated) at 2025-06-01T12:00:00Z: schema reviewed". */
export function describeDecision(d: Decision): string {
  const groups = d.groups.length > 0 ? ` (groups: ${d.groups.join(', ')})` : '';
  return `${d.verdict} by ${d.username}${groups}${d.at ? ` at ${d.at}` : ''}${d.message ? `: ${oneLine(d.message, 300)}` : ''}`;
}

function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
