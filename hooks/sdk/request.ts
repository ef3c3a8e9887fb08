// The validated CloudEvent, turned into the typed request a handler reads.
import type { ParsedRequest } from '../../schemas/index.ts';
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
  if (r.service !== undefined) revision.service = r.service;
  if (r.configuration !== undefined) revision.configuration = r.configuration;
  return {
    hook: data.hook.name,
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
