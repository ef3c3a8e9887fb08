// The gate's MutatingWebhookConfiguration as data: the same content as
// config/400-webhooks.yaml, with the endpoint (Service or URL), caBundle and namespace scope
// filled in. registration.ts writes it.
//
// What each webhook does when no replica answers (docs/design.md §6):
//   revisions    Ignore: config/210-stamp-policy.yaml (CEL in the apiserver) refuses a Revision
//                some PrestartHook matches unless it is held for it, so failing open admits only
//                Revisions no hook applies to.
//   deployments  Fail: the bindings are projected into a released Revision's Deployment once, when
//                Knative creates it (or changes its pod spec); Knative keeps that pod template
//                (it compares its deployment-hash label, not the spec), so its pods, at every scale
//                from zero and every replacement, start with their bindings and need no webhook.
//   pods         Fail: only pods whose template was not projected (Deployments made by an older
//                release), which would start without their bindings.
import type {
  V1LabelSelector,
  V1MutatingWebhook,
  V1MutatingWebhookConfiguration,
  AdmissionregistrationV1WebhookClientConfig as WebhookClientConfig,
} from '@kubernetes/client-node';
import { INJECT_LABEL, INJECTED_ANNOTATION, type LabelSelector } from '../../api/types.ts';

export const WEBHOOK_CONFIGURATION_NAME = 'knative-prestart';
export const REVISIONS_WEBHOOK = 'revisions.prestart.dev';
export const PODS_WEBHOOK = 'pods.prestart.dev';
export const DEPLOYMENTS_WEBHOOK = 'deployments.prestart.dev';
export const REVISIONS_PATH = '/webhooks/revisions';
export const PODS_PATH = '/webhooks/pods';
export const DEPLOYMENTS_PATH = '/webhooks/deployments';
/** Namespace label that scopes a gate instance, so several gates can share one cluster. */
export const GATE_INSTANCE_LABEL = 'prestart.dev/gate';
/**
 * Never intercepted: a broken or absent gate must not be able to block the control plane,
 * Knative itself, or the gate's own namespace.
 */
export const EXCLUDED_NAMESPACES: readonly string[] = ['kube-system', 'knative-serving', 'knative-eventing', 'knative-prestart'];

export interface WebhookConfigurationOptions {
  /** Object name; one per gate instance. */
  name: string;
  /** Reach the gate by URL, e.g. https://127.0.0.1:8443 on a local control plane. */
  urlBase?: string;
  /** Reach the gate through a Service (in a cluster). */
  service?: { name: string; namespace: string; port: number };
  /** PEM CA certificate(s) that issued the gate's serving certificate. */
  caBundle?: string;
  /**
   * Limits both webhooks to matching namespaces, on top of the system-namespace exclusion; e.g.
   * {matchLabels: {'prestart.dev/gate': '<instance>'}} when several gates share a cluster.
   */
  namespaceSelector?: LabelSelector;
  /** Labels the configuration prestart.dev/gate=<instance>, to tell gates' configurations apart. */
  instance?: string;
  /** The gate's own namespace, excluded like the system namespaces (a Service's namespace is too). */
  gateNamespace?: string;
  /**
   * Register the Revision webhook (default true). False where the apiserver stamps new Revisions
   * itself (stamp-path.ts): the webhook would only write the same stamp again, at a cost.
   */
  stampRevisions?: boolean;
}

export function buildWebhookConfiguration(options: WebhookConfigurationOptions): V1MutatingWebhookConfiguration {
  const namespaceSelector = webhookNamespaceSelector(options);
  const common = {
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    matchPolicy: 'Equivalent',
    reinvocationPolicy: 'Never',
    timeoutSeconds: 5,
    namespaceSelector,
  } satisfies SharedSettings;
  const labels: Record<string, string> = { 'app.kubernetes.io/part-of': 'knative-prestart' };
  if (options.instance) labels[GATE_INSTANCE_LABEL] = options.instance;
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: options.name, labels },
    webhooks: [
      ...(options.stampRevisions === false ? [] : [revisionsWebhook(options, common)]),
      {
        name: PODS_WEBHOOK,
        clientConfig: clientConfig(options, PODS_PATH),
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }],
        // Only pods of released Revisions whose hooks contributed bindings, and of those only the
        // ones whose pod template does not carry them yet (a Deployment of an older release).
        objectSelector: { matchLabels: { [INJECT_LABEL]: 'true' } },
        matchConditions: [
          { name: 'template-not-projected', expression: `!('${INJECTED_ANNOTATION}' in object.metadata.?annotations.orValue({}))` },
        ],
        failurePolicy: 'Fail',
        ...common,
      },
      {
        name: DEPLOYMENTS_WEBHOOK,
        clientConfig: clientConfig(options, DEPLOYMENTS_PATH),
        rules: [
          { apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments'], scope: 'Namespaced' },
        ],
        objectSelector: { matchLabels: { [INJECT_LABEL]: 'true' } },
        // Only when Knative makes the Deployment or replaces its pod spec; scaling (the
        // autoscaler patches spec.replicas) and `kubectl rollout restart` never wait for the gate.
        matchConditions: [
          {
            name: 'pod-spec-written',
            expression: "request.operation == 'CREATE' || object.spec.template.spec != oldObject.spec.template.spec",
          },
        ],
        failurePolicy: 'Fail',
        ...common,
      },
    ],
  };
}

/** What the three webhooks share. */
type SharedSettings = Pick<
  V1MutatingWebhook,
  'admissionReviewVersions' | 'sideEffects' | 'matchPolicy' | 'reinvocationPolicy' | 'timeoutSeconds' | 'namespaceSelector'
>;

function revisionsWebhook(options: WebhookConfigurationOptions, common: SharedSettings): V1MutatingWebhook {
  return {
    name: REVISIONS_WEBHOOK,
    clientConfig: clientConfig(options, REVISIONS_PATH),
    rules: [
      { apiGroups: ['serving.knative.dev'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['revisions'], scope: 'Namespaced' },
    ],
    objectSelector: {},
    // Fails open: the stamp policy (config/210-stamp-policy.yaml) refuses what a hook matches.
    failurePolicy: 'Ignore',
    ...common,
  };
}

export function webhookNamespaceSelector(
  options: Pick<WebhookConfigurationOptions, 'namespaceSelector' | 'service' | 'gateNamespace'>,
): V1LabelSelector {
  const excluded = [...EXCLUDED_NAMESPACES];
  for (const ns of [options.gateNamespace, options.service?.namespace]) {
    if (ns && !excluded.includes(ns)) excluded.push(ns);
  }
  const scope = options.namespaceSelector;
  const selector: V1LabelSelector = {
    matchExpressions: [
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
      ...(scope?.matchExpressions ?? []).map((e) => ({ key: e.key, operator: e.operator, ...(e.values ? { values: [...e.values] } : {}) })),
    ],
  };
  if (scope?.matchLabels && Object.keys(scope.matchLabels).length > 0) selector.matchLabels = { ...scope.matchLabels };
  return selector;
}

/**
 * True when `actual` (as read from the apiserver, with its defaults filled in) already says what
 * `desired` says, so no update is needed. Labels of `desired` must be present; others may be added.
 */
export function sameWebhookConfiguration(desired: V1MutatingWebhookConfiguration, actual: V1MutatingWebhookConfiguration): boolean {
  const wanted = desired.metadata?.labels ?? {};
  const have = actual.metadata?.labels ?? {};
  if (Object.entries(wanted).some(([k, v]) => have[k] !== v)) return false;
  return canonical(desired.webhooks ?? []) === canonical(actual.webhooks ?? []);
}

function clientConfig(options: WebhookConfigurationOptions, path: string): WebhookClientConfig {
  if ((options.urlBase === undefined) === (options.service === undefined)) {
    throw new Error('webhook configuration: give exactly one of urlBase and service');
  }
  const config: WebhookClientConfig = options.urlBase
    ? { url: `${httpsBase(options.urlBase)}${path}` }
    : { service: { ...(options.service as NonNullable<WebhookConfigurationOptions['service']>), path } };
  if (options.caBundle) config.caBundle = Buffer.from(options.caBundle, 'utf8').toString('base64');
  return config;
}

function httpsBase(urlBase: string): string {
  const url = new URL(urlBase);
  // The apiserver only calls webhooks over TLS, and rejects URLs with a query or fragment.
  if (url.protocol !== 'https:') throw new Error(`webhook configuration: urlBase must be https, got ${urlBase}`);
  if (url.search || url.hash) throw new Error(`webhook configuration: urlBase must not have a query or fragment: ${urlBase}`);
  return url.href.replace(/\/+$/, '');
}

/** JSON with sorted keys, without empty values: the apiserver drops or defaults those. */
function canonical(value: unknown): string {
  return JSON.stringify(normalize(value)) ?? '';
}

function normalize(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalize);
  if (value instanceof Date) return value.toISOString();
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = normalize((value as Record<string, unknown>)[key]);
    if (v === undefined || v === null) continue;
    if (Array.isArray(v) && v.length === 0) continue;
    if (typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length === 0) continue;
    out[key] = v;
  }
  return out;
}
