// An approval is three annotations on the Revision, written by `knative-prestart approve` (or
// kubectl). config/610-approval-policy.yaml makes the apiserver enforce who may write them and
// that approval-by names the writer. When it happened comes from managedFields, which the
// apiserver stamps: nothing the approver's client claims. Pure.
import type { V1ManagedFieldsEntry, V1ObjectMeta } from '@kubernetes/client-node';

export { APPROVAL_ANNOTATION, APPROVAL_BY_ANNOTATION } from '../../../api/types.ts';

import { APPROVAL_ANNOTATION, APPROVAL_BY_ANNOTATION } from '../../../api/types.ts';
export const APPROVAL_REASON_ANNOTATION = 'prestart.dev/approval-reason';
export const VERDICTS = ['approved', 'rejected'] as const;
export type ApprovalVerdict = (typeof VERDICTS)[number];

export interface Decision {
  verdict: ApprovalVerdict;
  /** The username the apiserver authenticated (the policy checks it). */
  by: string;
  /** RFC 3339, from managedFields; absent when the apiserver recorded none. */
  at?: string;
  reason?: string;
}

/** The decision on a Revision, undefined while there is none, or why the annotations do not make one. */
export function readDecision(meta: V1ObjectMeta | undefined): Decision | undefined | { invalid: string } {
  const annotations = meta?.annotations ?? {};
  const verdict = annotations[APPROVAL_ANNOTATION];
  if (verdict === undefined) return undefined;
  if (!(VERDICTS as readonly string[]).includes(verdict)) {
    return { invalid: `${APPROVAL_ANNOTATION} is "${verdict}", neither approved nor rejected` };
  }
  const by = annotations[APPROVAL_BY_ANNOTATION];
  if (!by) {
    return {
      invalid: `${APPROVAL_ANNOTATION} is set without ${APPROVAL_BY_ANNOTATION}: approvals are only accepted through the policy of config/610-approval-policy.yaml, which records who`,
    };
  }
  const decision: Decision = { verdict: verdict as ApprovalVerdict, by };
  const at = decidedAt(meta?.managedFields ?? []);
  if (at) decision.at = at;
  const reason = annotations[APPROVAL_REASON_ANNOTATION]?.trim();
  if (reason) decision.reason = reason;
  return decision;
}

/** When the approval annotation was last written: the time of the managedFields entry that owns it. */
export function decidedAt(entries: readonly V1ManagedFieldsEntry[]): string | undefined {
  const key = `f:${APPROVAL_ANNOTATION}`;
  const owner = entries.find((e) => {
    const fields = e.fieldsV1 as { 'f:metadata'?: { 'f:annotations'?: Record<string, unknown> } } | undefined;
    return fields?.['f:metadata']?.['f:annotations']?.[key] !== undefined;
  });
  const time = owner?.time as unknown;
  if (time instanceof Date) return time.toISOString();
  return typeof time === 'string' ? time : undefined;
}

/** "approved by alice at 2025-06-01T12:00:00Z: schema reviewed". */
export function describeDecision(d: Decision): string {
  return `${d.verdict} by ${d.by}${d.at ? ` at ${d.at}` : ''}${d.reason ? `: ${d.reason}` : ''}`;
}
