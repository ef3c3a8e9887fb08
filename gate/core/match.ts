// Which PrestartHooks apply to a new Revision.
import type { LabelSelector, LabelSelectorRequirement, PrestartHook, RevisionView } from '../../api/types.ts';

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
  const match = hook.spec.match ?? {};
  if (match.annotation) {
    const { key, value } = match.annotation;
    if (!Object.hasOwn(revision.annotations, key)) return false;
    if (value !== undefined && revision.annotations[key] !== value) return false;
  }
  return labelSelectorMatches(match.namespaceSelector, namespaceLabels) && labelSelectorMatches(match.revisionSelector, revision.labels);
}

/**
 * The hooks that apply to `revision`, sorted by (order, name): the order they run in. None for a
 * Revision of a Knative Service that some hook delivers to (hookService): a hook that runs on
 * Knative is never held, so no hook can wait on itself, and no two hooks on each other.
 */
export function hooksFor(
  revision: RevisionView,
  namespaceLabels: Readonly<Record<string, string>>,
  hooks: Iterable<PrestartHook>,
): PrestartHook[] {
  const all = [...hooks];
  if (servedHook(revision, all)) return [];
  return all.filter((h) => hookMatches(h, revision, namespaceLabels)).sort(compareHooks);
}

/** The first hook whose requests go to `revision`'s Knative Service, if any. */
export function servedHook(revision: RevisionView, hooks: readonly PrestartHook[]): PrestartHook | undefined {
  if (!revision.service) return undefined;
  return hooks.find((h) => {
    const target = hookService(h);
    return target !== undefined && target.name === revision.service && target.namespace === revision.namespace;
  });
}

const KNATIVE_SERVICE_HOST = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?$/;

/**
 * The Knative Service a hook's requests reach, where its delivery names one: a Broker
 * subscriber's ref to a serving.knative.dev Service (namespace: the Trigger's, the Broker's), or
 * a URL (http, or the subscriber's uri) whose host is a cluster-local Service name,
 * `<name>.<namespace>.svc[.cluster.local]`, which is how a Knative Service is addressed inside the
 * cluster. NATS hooks pull their requests and name no Service.
 */
export function hookService(hook: PrestartHook): { name: string; namespace: string } | undefined {
  const d = hook.spec.delivery;
  const ref = d.broker?.subscriber.ref;
  if (ref) {
    if (ref.kind !== 'Service' || !ref.apiVersion.startsWith('serving.knative.dev/')) return undefined;
    return { name: ref.name, namespace: ref.namespace ?? d.broker?.namespace ?? '' };
  }
  const url = d.transport === 'http' ? d.url : d.broker?.subscriber.uri;
  if (!url) return undefined;
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  const m = KNATIVE_SERVICE_HOST.exec(host);
  return m?.[1] && m[3] ? { name: m[1], namespace: m[3] } : undefined;
}

export function compareHooks(a: PrestartHook, b: PrestartHook): number {
  const byOrder = (a.spec.order ?? 0) - (b.spec.order ?? 0);
  if (byOrder !== 0) return byOrder;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
