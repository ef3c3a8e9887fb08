// Rule 5 of docs/protocol.md: a request is input from the network. Anyone who can post to a hook
// (or its Broker) can make one up, so before acting on it a built-in hook checks it against the
// cluster, and takes its params from the PrestartRun the gate wrote, never from the request:
// otherwise a forged request could choose the image a Job runs, or the Secret it binds.
import type { CustomObjectsApi, KubernetesObject, V1Container } from '@kubernetes/client-node';
import { REVISIONS, RUNS, type RunObject } from '../../../api/resources.ts';
import { HOLD_LABEL, type HookSnapshot } from '../../../api/types.ts';
import { runStatusOf } from '../../../gate/core/index.ts';
import type { HookRequest } from '../../sdk/types.ts';
import { errorLine, statusOf } from './kube.ts';
import { withRetries } from './poll.ts';

/** As much of a Knative Revision as the built-in hooks read. */
export interface RevisionResource extends KubernetesObject {
  spec?: { serviceAccountName?: string; containers?: V1Container[] };
}

export interface VerifiedRequest {
  revision: RevisionResource;
  run: RunObject;
  /** The hook's spec as the gate snapshotted it when the run started. */
  hook: HookSnapshot;
  /** Its params (the snapshot's, never the request's). */
  params: Record<string, unknown>;
}

/** The Revision and its PrestartRun, when they confirm the request; otherwise why not, in one sentence. */
export async function verifyRequest(custom: CustomObjectsApi, req: HookRequest, signal: AbortSignal): Promise<VerifiedRequest | string> {
  const { namespace, name, uid } = req.revision;
  const where = `${namespace}/${name}`;
  const revision = await read<RevisionResource>(custom, REVISIONS, namespace, name, signal);
  if (typeof revision === 'string') return `cannot confirm the request: Revision ${where} ${revision}`;
  if (revision.metadata?.uid !== uid) {
    return `cannot confirm the request: Revision ${where} has uid ${revision.metadata?.uid}, not ${uid} (deleted and created again?)`;
  }
  if (revision.metadata?.labels?.[HOLD_LABEL] !== 'true') {
    return `Revision ${where} is not held (no label ${HOLD_LABEL}=true): there is nothing to do before it starts`;
  }
  const run = await read<RunObject>(custom, RUNS, namespace, name, signal);
  if (typeof run === 'string') return `cannot confirm the request: PrestartRun ${where} ${run}`;
  if (run.spec?.revisionUID !== uid)
    return `cannot confirm the request: PrestartRun ${where} belongs to Revision uid ${run.spec?.revisionUID}`;
  const snapshot = run.spec.hooks?.find((h) => h.name === req.hook);
  if (!snapshot) return `cannot confirm the request: PrestartRun ${where} does not run hook ${req.hook}`;
  // A run just created has its first requests recorded in spec.startedAt before its status is stored.
  const current = runStatusOf(run)?.hooks.find((h) => h.name === req.hook)?.attempt;
  if (current !== req.attempt) {
    return `cannot confirm the request: attempt ${req.attempt} of hook ${req.hook} is not the current one of PrestartRun ${where} (${current ?? 'none'})`;
  }
  return { revision, run, hook: snapshot, params: snapshot.params ?? {} };
}

async function read<T>(
  custom: CustomObjectsApi,
  r: { group: string; version: string; plural: string },
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<T | string> {
  try {
    return (await withRetries(
      () => custom.getNamespacedCustomObject({ group: r.group, version: r.version, plural: r.plural, namespace, name }),
      signal,
    )) as T;
  } catch (err) {
    signal.throwIfAborted();
    if (statusOf(err) === 404) return 'does not exist';
    if (statusOf(err) === 403) return `cannot be read by the hook's identity (${errorLine(err)}): see config/600-builtin-hooks.yaml`;
    return `could not be read: ${errorLine(err)}`;
  }
}
