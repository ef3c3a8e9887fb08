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

/** What a cancel names: the same Revision UID, hook and attempt as the start it cancels. */
export function attemptKey(parsed: Pick<ParsedRequest, 'data'>): string {
  return `${parsed.data.revision.uid}/${parsed.data.hook.name}/${parsed.data.attempt}`;
}
