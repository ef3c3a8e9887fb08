// The mutating webhook's decision for Revision CREATE. Revision labels and annotations come
// from the tenant's template, so everything the gate later trusts (hold label, hook list, hold
// reason, inject label, cancel finalizer) is either written here or stripped here: a tenant
// cannot hold a Revision nobody will release, skip hooks, or forge a binding projection.

import {
  CANCEL_FINALIZER,
  HOLD_LABEL,
  HOOKS_ANNOTATION,
  INJECT_LABEL,
  type PrestartHook,
  REASON_ANNOTATION,
  type RevisionView,
} from '../../api/types.ts';
import { type JsonPatchOp, pointer } from './jsonpatch.ts';
import { hooksFor } from './match.ts';

export interface StampResult {
  patch: JsonPatchOp[];
  /** The hooks that apply, in run order; empty when the Revision is not held. */
  hookNames: string[];
}

export function stampRevision(
  revision: RevisionView,
  namespaceLabels: Readonly<Record<string, string>>,
  hooks: Iterable<PrestartHook>,
): StampResult {
  const hookNames = hooksFor(revision, namespaceLabels, hooks).map((h) => h.name);
  const patch: JsonPatchOp[] = [];
  const { labels, annotations, finalizers } = revision;

  // Gate-owned keys the tenant may have put on the template; the ones the gate wants are re-added below.
  const strippedLabels = hookNames.length > 0 ? [INJECT_LABEL] : [HOLD_LABEL, INJECT_LABEL];
  const strippedAnnotations = hookNames.length > 0 ? [REASON_ANNOTATION] : [HOOKS_ANNOTATION, REASON_ANNOTATION];
  for (const key of strippedLabels) {
    if (Object.hasOwn(labels, key)) patch.push({ op: 'remove', path: pointer('metadata', 'labels', key) });
  }
  for (const key of strippedAnnotations) {
    if (Object.hasOwn(annotations, key)) patch.push({ op: 'remove', path: pointer('metadata', 'annotations', key) });
  }

  // The cancel finalizer is the gate's: a forged one goes, and a held Revision gets it last. The
  // snapshot lists the names in name order: the apiserver's stamp (config/230) inserts one name per
  // hook in an order it does not fix, so only a sorted list comes out the same on both paths; the
  // run order is each hook's spec.order, which the run reads from the hooks themselves.
  const kept = finalizers.filter((f) => f !== CANCEL_FINALIZER);
  const wanted = hookNames.length > 0 ? [...kept, CANCEL_FINALIZER] : kept;
  if (wanted.length !== finalizers.length || wanted.some((f, i) => f !== finalizers[i])) {
    // Adding the whole list replaces it, present or absent (the view cannot tell those apart).
    patch.push({ op: 'add', path: pointer('metadata', 'finalizers'), value: wanted });
  }
  if (hookNames.length === 0) return { patch, hookNames };

  setKey(patch, 'labels', labels, HOLD_LABEL, 'true');
  setKey(patch, 'annotations', annotations, HOOKS_ANNOTATION, JSON.stringify([...hookNames].sort()));
  return { patch, hookNames };
}

function setKey(
  patch: JsonPatchOp[],
  map: 'labels' | 'annotations',
  current: Readonly<Record<string, string>>,
  key: string,
  value: string,
): void {
  if (current[key] === value && Object.hasOwn(current, key)) return;
  if (Object.keys(current).length === 0) {
    // An absent map cannot be added into; adding the whole map works whether it is absent or empty.
    patch.push({ op: 'add', path: pointer('metadata', map), value: { [key]: value } });
  } else {
    // 'add' on an existing member replaces it (RFC 6902 4.1), so one op covers both cases.
    patch.push({ op: 'add', path: pointer('metadata', map, key), value });
  }
}

/**
 * The hook names recorded on a held Revision, or undefined when the annotation is missing or is
 * not a JSON list of distinct, non-empty names (the caller must then not release: fail closed).
 */
export function parseHookNames(annotations: Readonly<Record<string, string>>): string[] | undefined {
  const raw = annotations[HOOKS_ANNOTATION];
  if (raw === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  if (!parsed.every((n): n is string => typeof n === 'string' && n !== '')) return undefined;
  if (new Set(parsed).size !== parsed.length) return undefined;
  return parsed;
}
