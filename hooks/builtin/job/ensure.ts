// Creating the request's Job, or adopting the one an earlier delivery of the same request
// created. The Job's name and labels are predictable, and a namespace editor can create Jobs
// and move the attempt (prestart.dev/retry): a Job found under that name is adopted only when it
// would run exactly what the hook's own would (adopt.ts). Everything after works on the uid this
// returns, so a Job deleted and re-created under the same name is not taken for ours.
import type { BatchV1Api, CustomObjectsApi, V1Job } from '@kubernetes/client-node';
import type { HookContext } from '../../sdk/types.ts';
import { errorLine, namespaceGrantHint, statusOf } from '../common/kube.ts';
import { pollUntil, withRetries } from '../common/poll.ts';
import { adoptionDiff, notAdoptedMessage } from './adopt.ts';
import { REVISION_UID_LABEL } from './manifest.ts';

const JOBS = { group: 'batch', version: 'v1', plural: 'jobs' } as const;

export interface JobApis {
  batch: BatchV1Api;
  /** Jobs as raw JSON: the typed client drops fields it does not know, which the comparison must see. */
  custom: CustomObjectsApi;
}

export type Ensured = { outcome: 'created' | 'adopted'; uid: string } | { error: string };

/**
 * Creates the Job, or adopts the one of that name when it is the hook's own (409). A Job of that
 * name left by an earlier Revision of the same name (other uid label) is replaced. `retry` is
 * the command that re-runs the hook, for the message when a Job is not adopted.
 */
export async function ensureJob(
  apis: JobApis,
  manifest: V1Job,
  revisionUid: string,
  giveUp: Date,
  ctx: HookContext,
  retry: string,
): Promise<Ensured> {
  const namespace = manifest.metadata?.namespace ?? '';
  const name = manifest.metadata?.name ?? '';
  const where = `${namespace}/${name}`;
  const create = async (): Promise<Ensured | 'conflict'> => {
    try {
      const made = await withRetries(() => apis.batch.createNamespacedJob({ namespace, body: manifest }), ctx.signal);
      return { outcome: 'created', uid: made.metadata?.uid ?? '' };
    } catch (err) {
      ctx.signal.throwIfAborted();
      if (statusOf(err) === 409) return 'conflict';
      const hint = statusOf(err) === 403 ? ` (${namespaceGrantHint('job', namespace)})` : '';
      return { error: `could not create Job ${where}: ${errorLine(err)}${hint}` };
    }
  };
  const first = await create();
  if (first !== 'conflict') return first;
  let existing: unknown;
  try {
    existing = await withRetries(() => apis.custom.getNamespacedCustomObject({ ...JOBS, namespace, name }), ctx.signal);
  } catch (err) {
    ctx.signal.throwIfAborted();
    return { error: `Job ${where} exists but cannot be read: ${errorLine(err)}` };
  }
  const meta = (existing as V1Job).metadata;
  if (meta?.labels?.[REVISION_UID_LABEL] === revisionUid) return adopt(apis, manifest, existing, ctx, retry);

  ctx.logger.info({ job: where }, 'replacing a Job left by an earlier Revision of the same name');
  await deleteJob(apis.batch, namespace, name, meta?.uid);
  const gone = await pollUntil(
    async () => {
      try {
        await apis.batch.readNamespacedJob({ name, namespace });
        return undefined;
      } catch (err) {
        if (statusOf(err) === 404) return true;
        throw err;
      }
    },
    { signal: ctx.signal, until: giveUp, maxMs: 1000 },
  );
  if (!gone) return { error: `Job ${where}, left by an earlier Revision of the same name, is still being deleted` };
  const second = await create();
  return second === 'conflict' ? { error: `Job ${where} exists and belongs to another Revision` } : second;
}

/**
 * Adopts `existing` when its spec is the manifest's as the apiserver would default it. A
 * server-side dry run of the manifest gives that defaulted form, mutating admission included,
 * under a generated name (the real one is taken).
 */
async function adopt(apis: JobApis, manifest: V1Job, existing: unknown, ctx: HookContext, retry: string): Promise<Ensured> {
  const namespace = manifest.metadata?.namespace ?? '';
  const name = manifest.metadata?.name ?? '';
  const probe = { ...manifest, metadata: { ...manifest.metadata, name: undefined, generateName: `${name.slice(0, 50)}-` } };
  let wanted: unknown;
  try {
    wanted = await withRetries(
      () => apis.custom.createNamespacedCustomObject({ ...JOBS, namespace, body: probe, dryRun: 'All' }),
      ctx.signal,
    );
  } catch (err) {
    ctx.signal.throwIfAborted();
    return {
      error: `Job ${namespace}/${name} exists, and the hook could not check that it is its own (a dry-run create of its Job failed: ${errorLine(err)}): not adopted; delete it and retry: ${retry}`,
    };
  }
  const differences = adoptionDiff(wanted, existing);
  if (differences.length > 0) {
    ctx.logger.warn({ job: `${namespace}/${name}`, differences }, 'a Job of this name exists and is not the hook’s: not adopted');
    return { error: notAdoptedMessage({ namespace, name }, differences, retry) };
  }
  return { outcome: 'adopted', uid: (existing as V1Job).metadata?.uid ?? '' };
}

/**
 * Deletes the Job and its pods (Jobs orphan their pods unless told otherwise); true when it was
 * there. With a uid, only that Job: never one someone else made under the same name since.
 */
export async function deleteJob(batch: BatchV1Api, namespace: string, name: string, uid?: string): Promise<boolean> {
  try {
    await batch.deleteNamespacedJob({
      name,
      namespace,
      propagationPolicy: 'Background',
      ...(uid ? { body: { preconditions: { uid } } } : {}),
    });
    return true;
  } catch {
    return false;
  }
}
