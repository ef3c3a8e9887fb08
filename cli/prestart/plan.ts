// `kn prestart plan`: which hooks a new Revision of a Service would get, in which order, and why
// each matched (or did not). Pure: the same matching the stamping webhook uses (gate/core/match.ts
// hooksFor), over a Revision built from the Service's template the way Knative builds it.
import type { LabelSelector, PrestartHook, RevisionView } from '../../api/types.ts';
import { hookMatches, hooksFor, labelSelectorMatches } from '../../gate/core/index.ts';

/** The parts of a Knative Service (or Configuration) plan reads. */
export interface ServiceLike {
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  spec?: {
    template?: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec?: { containers?: Array<{ image?: string }> };
    };
  };
}

/** The Revision Knative would create next: the template's labels and annotations, plus Knative's own labels. */
export function nextRevisionOf(service: ServiceLike, namespace: string): RevisionView {
  const name = service.metadata?.name ?? '';
  const template = service.spec?.template ?? {};
  const isService = (service.kind ?? 'Service') === 'Service';
  const labels: Record<string, string> = {
    ...(template.metadata?.labels ?? {}),
    'serving.knative.dev/configuration': name,
    ...(isService ? { 'serving.knative.dev/service': name } : {}),
  };
  return {
    namespace,
    name: `${name}-next`,
    uid: '',
    configuration: name,
    ...(isService ? { service: name } : {}),
    labels,
    annotations: { ...(template.metadata?.annotations ?? {}) },
    images: (template.spec?.containers ?? []).flatMap((c) => (c.image ? [c.image] : [])),
    createdAt: new Date(0),
    deleting: false,
    finalizers: [],
  };
}

function selectorText(s: LabelSelector): string {
  const terms = [
    ...Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(s.matchExpressions ?? []).map((e) => `${e.key} ${e.operator}${e.values ? ` (${e.values.join(', ')})` : ''}`),
  ];
  return terms.length > 0 ? terms.join(', ') : 'everything';
}

/** Why a hook matched: each criterion of its match, as it held. */
function whyMatched(hook: PrestartHook): string {
  const m = hook.spec.match ?? {};
  const parts: string[] = [];
  if (m.annotation)
    parts.push(`annotation ${m.annotation.key}${m.annotation.value !== undefined ? `=${m.annotation.value}` : ''} on the template`);
  if (m.namespaceSelector) parts.push(`namespace labels match ${selectorText(m.namespaceSelector)}`);
  if (m.revisionSelector) parts.push(`Revision labels match ${selectorText(m.revisionSelector)}`);
  if (parts.length > 0) return parts.join('; ');
  return hook.namespace === undefined
    ? 'its match is empty: every Revision outside the system namespaces'
    : `its match is empty: every Revision of ${hook.namespace}`;
}

/** Why a hook did not match: the first criterion that failed. */
function whyNot(hook: PrestartHook, revision: RevisionView, namespaceLabels: Readonly<Record<string, string>>): string {
  if (hook.namespace !== undefined && hook.namespace !== revision.namespace) return `a hook of namespace ${hook.namespace}`;
  const m = hook.spec.match ?? {};
  if (m.annotation) {
    const { key, value } = m.annotation;
    if (!Object.hasOwn(revision.annotations, key)) return `no annotation ${key} on the template`;
    if (value !== undefined && revision.annotations[key] !== value)
      return `annotation ${key} is "${revision.annotations[key]}", not "${value}"`;
  }
  if (!labelSelectorMatches(m.namespaceSelector, namespaceLabels))
    return `namespace labels do not match ${selectorText(m.namespaceSelector ?? {})}`;
  return `Revision labels do not match ${selectorText(m.revisionSelector ?? {})}`;
}

/**
 * Who writes the hold on a new Revision: the apiserver itself (config/230, MutatingAdmissionPolicy
 * prestart-stamp-revisions installed), only the gate's webhook, or unknown (the user may not read
 * MutatingAdmissionPolicies, which are cluster-scoped).
 */
export type Stamper = 'apiserver' | 'webhook' | 'unknown';

const STAMPED_BY: Record<Stamper, string> = {
  apiserver:
    'Stamped by the apiserver (MutatingAdmissionPolicy prestart-stamp-revisions; the gate registers no Revision webhook): while no gate replica runs, it is admitted held and its hooks are asked once the gate is back.',
  webhook:
    "Stamped by the gate's webhook: while no gate replica runs, Knative's create of it is refused and retried (on Kubernetes >= 1.36 the apiserver can stamp: release/knative-prestart-apiserver-stamp.yaml).",
  unknown: 'Who stamps it is not known here: you may not read MutatingAdmissionPolicies.',
};

export function renderPlan(
  service: ServiceLike,
  namespace: string,
  namespaceLabels: Readonly<Record<string, string>>,
  hooks: readonly PrestartHook[],
  stamper?: Stamper,
): string {
  const revision = nextRevisionOf(service, namespace);
  const applied = hooksFor(revision, namespaceLabels, hooks);
  const name = service.metadata?.name ?? '';
  const lines: string[] = [];
  if (applied.length === 0) {
    lines.push(`A new Revision of ${name} in ${namespace} would start at once: no PrestartHook applies.`);
  } else {
    lines.push(
      `A new Revision of ${name} in ${namespace} would be held for ${applied.length} hook${applied.length === 1 ? '' : 's'}, in this order:`,
    );
    for (const h of applied) {
      const s = h.spec;
      const traits = [
        h.namespace === undefined ? `order ${s.order ?? 0}` : `the namespace's own hook, after every PrestartHook; order ${s.order ?? 0}`,
        ...(h.problem === undefined ? [] : [`will not run: ${h.problem}`]),
        s.mode === 'Audit' ? 'Audit: never holds' : `failurePolicy ${s.failurePolicy ?? 'Fail'}`,
        `timeout ${s.timeout ?? '10m'}`,
        ...(s.heartbeatTimeout ? [`heartbeat ${s.heartbeatTimeout}`] : []),
      ];
      lines.push(`  ${h.name} (${traits.join(', ')}): ${whyMatched(h)}`);
    }
    lines.push('Hooks of the same order run in parallel; a higher order starts once the lower ones passed.');
    if (stamper) lines.push(STAMPED_BY[stamper]);
    if (stamper === 'apiserver' && applied.some((h) => h.namespace !== undefined)) {
      lines.push(
        "The namespace's own hooks are stamped by the gate's webhook (the apiserver's stamp knows PrestartHooks only): while no gate replica runs, its create is refused and retried.",
      );
    }
  }
  const others = hooks.filter((h) => !hookMatches(h, revision, namespaceLabels));
  if (others.length > 0) {
    lines.push('Not applied:');
    for (const h of [...others].sort((a, b) => (a.name < b.name ? -1 : 1)))
      lines.push(`  ${h.name}: ${whyNot(h, revision, namespaceLabels)}`);
  }
  return lines.join('\n');
}
