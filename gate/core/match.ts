// Which PrestartHooks apply to a new Revision.
import type { LabelSelector, LabelSelectorRequirement, PrestartHook, RevisionView } from '../../api/types.ts';
import { runOrder } from './namespaced-hooks.ts';

/**
 * Kubernetes LabelSelector semantics: every matchLabels entry and every matchExpressions
 * requirement must hold; an empty selector matches everything. `undefined` means "no condition"
 * and matches too. A malformed requirement (In without values, unknown operator) matches nothing,
 * as the apiserver would refuse to build a selector from it.
 */
export function labelSelectorMatches(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (!selector) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!Object.hasOwn(labels, key) || labels[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((req) => requirementMatches(req, labels));
}

function requirementMatches(req: LabelSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, req.key);
  const values = req.values ?? [];
  switch (req.operator) {
    case 'In':
      return values.length > 0 && has && values.includes(labels[req.key] as string);
    case 'NotIn':
      return values.length > 0 && (!has || !values.includes(labels[req.key] as string));
    case 'Exists':
      return values.length === 0 && has;
    case 'DoesNotExist':
      return values.length === 0 && !has;
    default:
      return false;
  }
}

/** The problems the apiserver would report for this selector; empty when it is valid. */
export function labelSelectorErrors(selector: LabelSelector | undefined): string[] {
  const errors: string[] = [];
  for (const [i, req] of (selector?.matchExpressions ?? []).entries()) {
    const values = req.values ?? [];
    const at = `matchExpressions[${i}] (${req.key})`;
    if (req.operator === 'In' || req.operator === 'NotIn') {
      if (values.length === 0) errors.push(`${at}: operator ${req.operator} needs at least one value`);
    } else if (req.operator === 'Exists' || req.operator === 'DoesNotExist') {
      if (values.length > 0) errors.push(`${at}: operator ${req.operator} takes no values`);
    } else {
      errors.push(`${at}: unknown operator ${JSON.stringify(req.operator)}`);
    }
  }
  return errors;
}

export function hookMatches(hook: PrestartHook, revision: RevisionView, namespaceLabels: Readonly<Record<string, string>>): boolean {
  // A team's hook never applies to another namespace's Revisions, whatever its match says.
  if (hook.namespace !== undefined && hook.namespace !== revision.namespace) return false;
  const match = hook.spec.match ?? {};
  if (match.annotation) {
    const { key, value } = match.annotation;
    if (!Object.hasOwn(revision.annotations, key)) return false;
    if (value !== undefined && revision.annotations[key] !== value) return false;
  }
  return labelSelectorMatches(match.namespaceSelector, namespaceLabels) && labelSelectorMatches(match.revisionSelector, revision.labels);
}

/** The hooks that apply to `revision`, sorted by (stage, name): the order they run in. */
export function hooksFor(
  revision: RevisionView,
  namespaceLabels: Readonly<Record<string, string>>,
  hooks: Iterable<PrestartHook>,
): PrestartHook[] {
  return [...hooks].filter((h) => hookMatches(h, revision, namespaceLabels)).sort(compareHooks);
}

export function compareHooks(a: PrestartHook, b: PrestartHook): number {
  // A namespaced hook's stage comes after every PrestartHook's (namespaced-hooks.ts runOrder).
  const byOrder = runOrder({ name: a.name, order: a.spec.order }) - runOrder({ name: b.name, order: b.spec.order });
  if (byOrder !== 0) return byOrder;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
