// Whether a live Trigger already is what the gate wants. Knative's webhook adds defaults to a
// Trigger (an empty `filter`, the subscriber ref's namespace), and admins may add labels, so
// equality would never hold: the live object must *cover* the desired one instead.
// Covering cannot notice a field the gate stopped setting (a subscriber losing its `uri`), so
// the desired object also carries a hash of itself; an object applied from older desires fails
// the check through that annotation.
import { createHash } from 'node:crypto';
import type { TriggerObject } from './desired.ts';

export const APPLIED_HASH_ANNOTATION = 'prestart.dev/applied-hash';

/** True when every member of `wanted` is in `live` with the same value (recursively; lists match item by item). */
export function covers(live: unknown, wanted: unknown): boolean {
  if (wanted === undefined) return true;
  if (Array.isArray(wanted)) {
    return Array.isArray(live) && live.length === wanted.length && wanted.every((w, i) => covers(live[i], w));
  }
  if (wanted !== null && typeof wanted === 'object') {
    if (live === null || typeof live !== 'object' || Array.isArray(live)) return false;
    const l = live as Record<string, unknown>;
    return Object.entries(wanted as Record<string, unknown>).every(([k, w]) => covers(l[k], w));
  }
  return live === wanted;
}

/** A short, stable hash of what the gate sets on a Trigger. */
export function desiredHash(t: TriggerObject): string {
  const { labels, ownerReferences } = t.metadata;
  return createHash('sha256')
    .update(JSON.stringify({ labels, ownerReferences: ownerReferences ?? [], spec: t.spec }))
    .digest('hex')
    .slice(0, 16);
}

/** The object the gate applies: the desired Trigger with its hash. */
export function withHash(t: TriggerObject): TriggerObject {
  return {
    ...t,
    metadata: { ...t.metadata, annotations: { ...t.metadata.annotations, [APPLIED_HASH_ANNOTATION]: desiredHash(t) } },
  };
}
