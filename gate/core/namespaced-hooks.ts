// A team's own hooks (NamespacedPrestartHook), as the rest of the core sees them: a PrestartHook
// named `<namespace>/<name>` (a PrestartHook's name is a DNS label, so the two never collide, and
// the stamp policy's quoted-name test never takes one for the other), whose spec the gate derives
// from the team's: the delivery resolved to its Service's cluster address, the reply identity in
// its own namespace, no namespace selector. Its stage comes after every PrestartHook's, so it adds a
// hold and can never lift, skip or outlast an admin's: an admin's hook has passed before a team's
// is asked, and a team's failurePolicy Ignore only lets its own hook go.
//
// The CRD refuses a spec that sends anywhere else (config/100-namespacedprestarthook-crd.yaml);
// this checks the same again (an object stored before those rules, a CRD edited by hand): a hook
// that fails a check is kept, with the reason, and every run it is in fails it (fail closed).
import { isDns1123Label } from '../../api/names.ts';
import type { NamespacedPrestartHookSpec, PrestartHook, PrestartHookSpec } from '../../api/types.ts';

/** The largest order a PrestartHook may have (its CRD's maximum). */
export const CLUSTER_ORDER_MAX = 100;
/** A namespaced hook's stage is this plus its own order: after every PrestartHook's. */
export const NAMESPACED_ORDER_BASE = CLUSTER_ORDER_MAX + 1;
/** How many NamespacedPrestartHooks one namespace may have before none of them runs (--namespaced-hook-limit). */
export const DEFAULT_NAMESPACED_HOOK_LIMIT = 20;
/**
 * The largest limit the gate accepts: a run holds at most 64 hooks (the PrestartRun CRD), and the
 * admin's hooks need room beside a namespace's.
 */
export const MAX_NAMESPACED_HOOK_LIMIT = 40;
export const DEFAULT_CLUSTER_DOMAIN = 'cluster.local';

export function namespacedHookName(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The namespace of a namespaced hook's name; undefined for a PrestartHook's. */
export function namespaceOfHook(name: string): string | undefined {
  const slash = name.indexOf('/');
  return slash < 0 ? undefined : name.slice(0, slash);
}

/** The kind a hook's name belongs to, for messages. */
export function hookKind(name: string): string {
  return namespaceOfHook(name) === undefined ? 'PrestartHook' : 'NamespacedPrestartHook';
}

/** The stage a hook runs in: its order, after every PrestartHook's for a namespaced hook. */
export function runOrder(hook: { name: string; order?: number }): number {
  return (namespaceOfHook(hook.name) === undefined ? 0 : NAMESPACED_ORDER_BASE) + (hook.order ?? 0);
}

export interface NamespacedHookSource {
  namespace: string;
  name: string;
  generation: number;
  spec: NamespacedPrestartHookSpec;
}

/** The reason a namespace's hooks do not run when it has more than the gate allows. */
export function overLimitProblem(namespace: string, count: number, limit: number): string {
  return (
    `namespace ${namespace} has ${count} NamespacedPrestartHooks, more than this gate's limit of ${limit} ` +
    `(--namespaced-hook-limit): none of them runs until the namespace has at most ${limit}`
  );
}

/**
 * The hook as the core runs it. `problem` (e.g. the namespace is over its limit) is kept as the
 * reason the hook will not run, before any found here.
 */
export function namespacedHook(source: NamespacedHookSource, clusterDomain: string, problem?: string): PrestartHook {
  const { namespace, name } = source;
  const raw = (source.spec ?? {}) as unknown as Record<string, unknown>;
  const problems = problem === undefined ? [] : [problem];
  if (!isDns1123Label(namespace) || !isDns1123Label(name)) problems.push(`the name ${namespace}/${name} is not two DNS-1123 labels`);
  const match = record(raw.match);
  if (match.namespaceSelector !== undefined)
    problems.push('match.namespaceSelector is not allowed: the hook applies to its own namespace only');
  const { url, problems: deliveryProblems } = deliveryUrl(namespace, record(raw.delivery), clusterDomain);
  problems.push(...deliveryProblems);
  const identity = record(raw.identity);
  if (identity.audience !== undefined) problems.push("identity.audience is not allowed: the gate's own token goes only to an admin's hook");
  const serviceAccount = record(identity.serviceAccount);
  if (serviceAccount.namespace !== undefined && serviceAccount.namespace !== namespace) {
    problems.push(`identity.serviceAccount must be in the hook's own namespace ${namespace}, not ${String(serviceAccount.namespace)}`);
  }
  const spec: PrestartHookSpec = {
    match: {
      ...(match.annotation === undefined ? {} : { annotation: match.annotation as PrestartHookSpec['match']['annotation'] }),
      ...(match.revisionSelector === undefined
        ? {}
        : { revisionSelector: match.revisionSelector as PrestartHookSpec['match']['revisionSelector'] }),
    },
    order: source.spec.order ?? 0,
    timeout: source.spec.timeout,
    failurePolicy: source.spec.failurePolicy,
    resendInterval: source.spec.resendInterval,
    ...(source.spec.heartbeatTimeout === undefined ? {} : { heartbeatTimeout: source.spec.heartbeatTimeout }),
    ...(source.spec.mode === undefined ? {} : { mode: source.spec.mode }),
    ...(source.spec.params === undefined ? {} : { params: source.spec.params }),
    ...(source.spec.contributions === undefined ? {} : { contributions: source.spec.contributions }),
    ...(source.spec.retryAfter === undefined ? {} : { retryAfter: source.spec.retryAfter }),
    // No address at all for a hook with a problem: nothing can send to it by mistake.
    delivery: url === undefined || problems.length > 0 ? { transport: 'http' } : { transport: 'http', url },
    ...(typeof serviceAccount.name === 'string' ? { identity: { serviceAccount: { namespace, name: serviceAccount.name } } } : {}),
  };
  const hook: PrestartHook = { name: namespacedHookName(namespace, name), generation: source.generation, spec, namespace };
  return problems.length === 0 ? hook : { ...hook, problem: problems.join('; ') };
}

const SERVICE_NAME = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const PATH = /^\/[A-Za-z0-9._~/-]*$/;

/** The address of the Service (or Knative Service) the delivery names, in the hook's own namespace. */
function deliveryUrl(namespace: string, delivery: Record<string, unknown>, clusterDomain: string): { url?: string; problems: string[] } {
  const problems: string[] = [];
  const transport = delivery.transport ?? 'http';
  if (transport !== 'http') problems.push(`transport ${String(transport)} is not allowed: only http to a Service of the hook's namespace`);
  for (const field of ['url', 'broker', 'nats']) {
    if (delivery[field] !== undefined) problems.push(`delivery.${field} is not allowed: name a Service of the hook's namespace`);
  }
  const service = delivery.service === undefined ? undefined : record(delivery.service);
  const kservice = delivery.knativeService === undefined ? undefined : record(delivery.knativeService);
  if ((service === undefined) === (kservice === undefined)) {
    problems.push('exactly one of delivery.service and delivery.knativeService is needed');
    return { problems };
  }
  const target = (service ?? kservice) as Record<string, unknown>;
  const name = target.name;
  if (typeof name !== 'string' || name.length > 63 || !SERVICE_NAME.test(name))
    problems.push(`the Service name ${JSON.stringify(name)} is not a DNS-1035 label`);
  if (target.namespace !== undefined && target.namespace !== namespace) {
    problems.push(`the Service must be in the hook's own namespace ${namespace}, not ${String(target.namespace)}`);
  }
  const port = service === undefined ? 80 : (service.port ?? 80);
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) problems.push(`port ${String(port)} is not 1-65535`);
  const path = target.path ?? '/';
  if (typeof path !== 'string' || path.length > 1024 || !PATH.test(path))
    problems.push(`path ${JSON.stringify(path)} is not an absolute path`);
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(clusterDomain)) {
    problems.push(`the gate's cluster domain ${JSON.stringify(clusterDomain)} is not a DNS name`);
  }
  if (problems.length > 0) return { problems };
  const portPart = port === 80 ? '' : `:${port}`;
  return { url: `http://${name as string}.${namespace}.svc.${clusterDomain}${portPart}${path as string}`, problems };
}

function record(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** What the gate reads of the Service a namespaced hook's address names, before it sends there. */
export interface TargetService {
  type?: string;
  /** For type ExternalName: the name it leads to. */
  externalName?: string;
  /** Its controller (ownerReferences[controller=true]). */
  controller?: { apiVersion?: string; kind?: string; name?: string };
}

/**
 * The Service a namespaced hook's address names: `<name>.<namespace>.svc.<domain>` as
 * namespacedHook wrote it. Undefined for any other address (the caller refuses it).
 */
export function serviceOfAddress(url: string, namespace: string, clusterDomain: string): string | undefined {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  const suffix = `.${namespace}.svc.${clusterDomain}`;
  if (!host.endsWith(suffix)) return undefined;
  const name = host.slice(0, -suffix.length);
  return SERVICE_NAME.test(name) ? name : undefined;
}

/**
 * Why the gate will not send to this Service now, or undefined when it may. A Service of type
 * ExternalName names another address (another namespace's Service, the apiserver, an address
 * outside the cluster), so it is refused, except the one Knative keeps for a Knative Service of the
 * same name, which leads to Knative's own local gateway. Everything a tenant may write (the
 * Service, its owner references, a Route or Knative Service of that name) can imitate that one,
 * so it counts only when it leads to an address `knativeGateways` names: the domainInternal
 * addresses in the status of the Route's KIngress, which only Knative writes. A Service not found
 * may come later (retriable).
 */
export function targetProblem(
  namespace: string,
  name: string,
  service: TargetService | undefined,
  knativeGateways: readonly string[],
): { problem: string; retriable: boolean } | undefined {
  if (!service) return { problem: `Service ${namespace}/${name} not found`, retriable: true };
  if (service.type !== 'ExternalName') return undefined;
  const c = service.controller;
  const byRoute = c?.kind === 'Route' && (c.apiVersion ?? '').startsWith('serving.knative.dev/') && c.name === name;
  const leadsTo = hostName(service.externalName ?? '');
  if (byRoute && leadsTo !== '' && knativeGateways.some((g) => hostName(g) === leadsTo)) return undefined;
  return {
    problem:
      `Service ${namespace}/${name} is of type ExternalName, which names another address (${JSON.stringify(service.externalName ?? '')}, ` +
      "not the local gateway Knative's ingress reports for a Knative Service of that name): a NamespacedPrestartHook " +
      "sends only to a Service of its namespace's pods, or to a Knative Service",
    // Knative's own points at a placeholder until its ingress is ready: asked again, not failed.
    retriable: byRoute,
  };
}

/** DNS names compare without case and without a trailing dot. */
function hostName(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}
