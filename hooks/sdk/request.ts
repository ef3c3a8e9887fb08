// The validated CloudEvent, turned into the typed request a handler reads.
import { type ParsedRequest, type RequestedRevision, referenceToRun } from '../../schemas/index.ts';
import type { HookRequest } from './types.ts';

/** Only for action=start requests (they always carry a deadline). */
export function toHookRequest(parsed: ParsedRequest): HookRequest {
  const { data } = parsed;
  const r = data.revision;
  const revision: HookRequest['revision'] = {
    namespace: r.namespace,
    name: r.name,
    uid: r.uid,
    labels: { ...r.labels },
    annotations: { ...r.annotations },
    images: [...r.images],
  };
  if (r.containers !== undefined) revision.containers = r.containers.map((c) => ({ ...c }));
  if (r.service !== undefined) revision.service = r.service;
  if (r.configuration !== undefined) revision.configuration = r.configuration;
  return {
    hook: data.hook.name,
    version: parsed.version,
    revision,
    params: structuredClone(data.hook.params),
    attempt: data.attempt,
    deadline: new Date(data.deadline ?? Number.NaN),
    allowedContributions: [...data.contributions.allowed],
    event: parsed.event,
  };
}

/**
 * What a cancel names: the start it cancels, whose id is the cancel's without `/cancel` (the key
 * of that start). Ids name the PrestartRun, so a run created again for the same Revision, which
 * starts at attempt 1 again, is never taken for a cancelled one.
 */
export function attemptKey(parsed: Pick<ParsedRequest, 'data' | 'key'>): string {
  return parsed.data.action === 'cancel' && parsed.key.endsWith(CANCEL_SUFFIX) ? parsed.key.slice(0, -CANCEL_SUFFIX.length) : parsed.key;
}

const CANCEL_SUFFIX = '/cancel';

/**
 * What to scan, approve or run for each container: name → the digest Knative resolved, or the
 * image as written where Knative does not resolve that registry (it then runs exactly that).
 * Undefined for a request from a version 1 gate, which does not say what will run: decide
 * explicitly what such a request gets (fail, or fall back to revision.images, which names no
 * containers and may hold tags).
 */
export function imagesToRun(
  request: { revision: Pick<RequestedRevision, 'containers'> } | { data: { revision: Pick<RequestedRevision, 'containers'> } },
): Record<string, string> | undefined {
  const containers = 'data' in request ? request.data.revision.containers : request.revision.containers;
  if (containers === undefined) return undefined;
  return Object.fromEntries(containers.map((c) => [c.name, referenceToRun(c)]));
}
