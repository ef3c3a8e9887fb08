// The gate's two mutating admission webhooks. Both are side-effect free (safe under dry-run)
// and answer from the informer caches, so they stay within a few milliseconds.
//   /webhooks/revisions: stamps a new Revision with the hold label and the snapshot of its hooks.
//   /webhooks/pods: projects hook contributions into the pods of a released Revision.
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import { type RevisionObject, type RunObject, toRevisionView } from '../../api/resources.ts';
import type { PrestartHook } from '../../api/types.ts';
import { contributionsOf, type JsonPatchOp, podPatch, stampRevision } from '../core/index.ts';
import type { Metrics } from '../shell/metrics.ts';

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
  status?: { code: number; message: string };
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
}

/** What the handlers read; the gate passes its informer caches, tests may pass plain maps. */
export interface AdmissionSources {
  hooks(): Iterable<PrestartHook>;
  namespaceLabels(namespace: string): Promise<Record<string, string> | undefined>;
  run(namespace: string, name: string): Promise<RunObject | undefined>;
}

export type PodSpecLike = Parameters<typeof podPatch>[0];

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
  return router;
}

type Admit = (req: AdmissionRequest) => Promise<Omit<AdmissionResponse, 'uid'>>;

function review(name: string, metrics: Metrics, log: Logger, admit: Admit) {
  return async (httpReq: Request, res: Response) => {
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
      log.error({ err, webhook: name }, 'admission failed');
      response = { uid: request.uid, allowed: false, status: { code: 500, message: `knative-prestart: ${String(err)}` } };
    }
    metrics.admissions.inc({ webhook: name, result: response.allowed ? (response.patch ? 'patched' : 'allowed') : 'denied' });
    res.json({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response });
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
  const nsLabels = await sources.namespaceLabels(namespace);
  // A namespace outside this gate's scope: its Revisions are not ours to hold.
  if (nsLabels === undefined) return { allowed: true };
  const revision = toRevisionView({ ...obj, metadata: { ...obj.metadata, namespace } });
  const { patch } = stampRevision(revision, nsLabels, sources.hooks());
  return patchResponse(patch);
}

async function admitPod(req: AdmissionRequest, sources: AdmissionSources, bindingRoot: string): Promise<Omit<AdmissionResponse, 'uid'>> {
  if (req.operation !== 'CREATE' || !req.object) return { allowed: true };
  const pod = req.object as PodSpecLike & { metadata?: { labels?: Record<string, string> } };
  const revisionName = pod.metadata?.labels?.['serving.knative.dev/revision'];
  const namespace = req.namespace ?? '';
  if (!revisionName) return { allowed: true };
  const run = await sources.run(namespace, revisionName);
  if (!run) {
    // Fail closed: a pod of a Revision whose hooks contributed bindings must not start without them.
    return {
      allowed: false,
      status: {
        code: 403,
        message: `knative-prestart: no PrestartRun ${namespace}/${revisionName} holds the bindings for this pod; see kubectl get prestartrun ${revisionName} -n ${namespace}`,
      },
    };
  }
  return patchResponse(podPatch(pod, contributionsOf(run.status), bindingRoot));
}
