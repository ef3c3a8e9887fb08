// The gate's two mutating admission webhooks. Both are side-effect free (safe under dry-run)
// and answer from the informer caches, so they stay within a few milliseconds; what a cache
// cannot tell (a namespace it has not seen, a run it does not hold) is read from the apiserver.
// When neither can answer, the request is refused with a message that says to retry: a Revision
// is never admitted without the hold it should have.
//   /webhooks/revisions: stamps a new Revision with the hold label and the snapshot of its hooks.
//   /webhooks/deployments: projects hook contributions into the pod template of a released
//     Revision's Deployment, so its pods start with them without asking the gate.
//   /webhooks/pods: the same for a pod whose template does not carry them (an older Deployment).
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import { type RevisionObject, type RunObject, toRevisionView } from '../../api/resources.ts';
import type { PrestartHook } from '../../api/types.ts';
import { deploymentTemplatePatch, type PodTemplateLike } from '../core/deployment-patch.ts';
import { contributionsOf, hookKind, type JsonPatchOp, type PodView, podPatch, stampRevision } from '../core/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';

interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; kind?: string };
  operation?: string;
  namespace?: string;
  dryRun?: boolean;
  object?: unknown;
}

interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; message: string; reason?: string };
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
}

/**
 * Thrown by a source that cannot answer now (a cache not synced, the apiserver unreachable): the
 * request is refused as unavailable, and the caller (Knative's controller, kubectl) retries.
 */
export class RetryLater extends Error {
  override readonly name = 'RetryLater';
}

/** What the handlers read; the gate passes its informer caches, tests may pass plain maps. */
export interface AdmissionSources {
  /**
   * What may hold a Revision of `namespace`: every PrestartHook and that namespace's
   * NamespacedPrestartHooks (gate/kube/hook-catalog.ts); throws RetryLater while they are not known.
   */
  hooks(namespace: string): Iterable<PrestartHook>;
  /**
   * The labels of a namespace this gate holds Revisions in, or undefined for a namespace outside
   * its scope (one that exists and does not match --namespace-selector). Throws RetryLater when it
   * cannot tell.
   */
  namespaceLabels(namespace: string): Promise<Record<string, string> | undefined>;
  run(namespace: string, name: string): Promise<RunObject | undefined>;
}

const MAX_REVIEW_BYTES = 3 * 1024 * 1024;

export function admissionRouter(sources: AdmissionSources, log: Logger, metrics: Metrics, bindingRoot = '/bindings'): Router {
  const router = express.Router();
  router.use(express.json({ limit: MAX_REVIEW_BYTES }));
  router.post(
    '/webhooks/revisions',
    review('revisions', metrics, log, (req) => admitRevision(req, sources)),
  );
  router.post(
    '/webhooks/pods',
    review('pods', metrics, log, (req) => admitPod(req, sources, bindingRoot)),
  );
  router.post(
    '/webhooks/deployments',
    review('deployments', metrics, log, (req) => admitDeployment(req, sources, bindingRoot)),
  );
  return router;
}

type Admit = (req: AdmissionRequest) => Promise<Omit<AdmissionResponse, 'uid'>>;

function review(name: string, metrics: Metrics, log: Logger, admit: Admit) {
  return async (httpReq: Request, res: Response) => {
    const timer = metrics.admissionSeconds.startTimer({ webhook: name });
    const body = httpReq.body as { apiVersion?: string; kind?: string; request?: AdmissionRequest } | undefined;
    const request = body?.request;
    if (body?.kind !== 'AdmissionReview' || !request?.uid) {
      metrics.admissions.inc({ webhook: name, result: 'malformed' });
      res.status(400).json({ error: 'expected an admission.k8s.io/v1 AdmissionReview with a request' });
      return;
    }
    let response: AdmissionResponse;
    try {
      response = { uid: request.uid, ...(await admit(request)) };
    } catch (err) {
      // Answer with a denial that says why; the webhook's failurePolicy decides nothing here.
      if (err instanceof RetryLater) {
        log.warn({ reason: err.message, webhook: name }, 'admission refused until the gate can decide');
        response = {
          uid: request.uid,
          allowed: false,
          status: { code: 503, reason: 'ServiceUnavailable', message: `knative-prestart: ${err.message}; nothing was created, retry` },
        };
      } else {
        log.error({ err, webhook: name }, 'admission failed');
        response = { uid: request.uid, allowed: false, status: { code: 500, message: `knative-prestart: ${String(err)}` } };
      }
    }
    metrics.admissions.inc({ webhook: name, result: response.allowed ? (response.patch ? 'patched' : 'allowed') : 'denied' });
    res.json({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response });
    timer();
  };
}

function patchResponse(patch: JsonPatchOp[]): Omit<AdmissionResponse, 'uid'> {
  if (patch.length === 0) return { allowed: true };
  return { allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') };
}

async function admitRevision(req: AdmissionRequest, sources: AdmissionSources): Promise<Omit<AdmissionResponse, 'uid'>> {
  if (req.operation !== 'CREATE' || !req.object) return { allowed: true };
  const obj = req.object as RevisionObject;
  const namespace = req.namespace ?? obj.metadata?.namespace ?? '';
  const hooks = sources.hooks(namespace);
  const nsLabels = await sources.namespaceLabels(namespace);
  // A namespace that exists outside this gate's scope: its Revisions are not ours to hold.
  if (nsLabels === undefined) return { allowed: true };
  const revision = toRevisionView({ ...obj, metadata: { ...obj.metadata, namespace } });
  const { patch, hookNames } = stampRevision(revision, nsLabels, hooks);
  // A team's hook the gate will not run (its namespace is over the limit, or it names a target it
  // may not): the Revision it matches is refused with the reason, rather than held for nothing.
  const refused = unrunnable(hooks, hookNames);
  if (refused) return { allowed: false, status: { code: 403, reason: 'Forbidden', message: `knative-prestart: ${refused}` } };
  return patchResponse(patch);
}

function unrunnable(hooks: Iterable<PrestartHook>, names: readonly string[]): string | undefined {
  // One line per reason (a namespace over its limit gives every hook the same one).
  const byProblem = new Map<string, string[]>();
  for (const hook of hooks) {
    if (hook.problem === undefined || !names.includes(hook.name)) continue;
    byProblem.set(hook.problem, [...(byProblem.get(hook.problem) ?? []), hook.name]);
  }
  if (byProblem.size === 0) return undefined;
  const lines = [...byProblem].map(([problem, which]) => {
    const named = which.slice(0, 3).join(', ') + (which.length > 3 ? ` and ${which.length - 3} more` : '');
    return `${hookKind(which[0] ?? '')} ${named}: ${problem}`;
  });
  return `${lines.join('; ')}. Nothing was created`;
}

async function admitPod(req: AdmissionRequest, sources: AdmissionSources, bindingRoot: string): Promise<Omit<AdmissionResponse, 'uid'>> {
  if (req.operation !== 'CREATE' || !req.object) return { allowed: true };
  const pod = req.object as PodView & { metadata?: { labels?: Record<string, string> } };
  const revisionName = pod.metadata?.labels?.['serving.knative.dev/revision'];
  const namespace = req.namespace ?? '';
  if (!revisionName) return { allowed: true };
  const { run, denial } = await runWithBindings(sources, namespace, revisionName, 'pod');
  if (!run) return denial;
  return patchResponse(podPatch(pod, contributionsOf(run.status), bindingRoot));
}

type DeploymentLike = {
  metadata?: { labels?: Record<string, string> };
  spec?: { template?: Partial<PodTemplateLike> };
};

/** Knative creates a released Revision's Deployment (or replaces its pod spec): its template gets the bindings. */
async function admitDeployment(
  req: AdmissionRequest,
  sources: AdmissionSources,
  bindingRoot: string,
): Promise<Omit<AdmissionResponse, 'uid'>> {
  if ((req.operation !== 'CREATE' && req.operation !== 'UPDATE') || !req.object) return { allowed: true };
  const deployment = req.object as DeploymentLike;
  const revisionName = deployment.metadata?.labels?.['serving.knative.dev/revision'];
  const template = deployment.spec?.template;
  if (!revisionName || !template?.spec) return { allowed: true };
  const { run, denial } = await runWithBindings(sources, req.namespace ?? '', revisionName, 'Deployment');
  if (!run) return denial;
  const marker = run.metadata?.uid ?? 'unknown';
  return patchResponse(deploymentTemplatePatch({ ...template, spec: template.spec }, contributionsOf(run.status), bindingRoot, marker));
}

/** The run holding a released Revision's bindings, or the denial to answer without it (fail closed). */
async function runWithBindings(
  sources: AdmissionSources,
  namespace: string,
  revisionName: string,
  what: 'pod' | 'Deployment',
): Promise<{ run: RunObject; denial?: undefined } | { run?: undefined; denial: Omit<AdmissionResponse, 'uid'> }> {
  const run = await sources.run(namespace, revisionName);
  if (run) return { run };
  // A pod of a Revision whose hooks contributed bindings must not start without them.
  return {
    denial: {
      allowed: false,
      status: {
        code: 403,
        message: `knative-prestart: no PrestartRun ${namespace}/${revisionName} holds the bindings for this ${what}; see kubectl get prestartrun ${revisionName} -n ${namespace}`,
      },
    },
  };
}
