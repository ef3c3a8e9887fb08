// Builders for the three contribution kinds, so a hook need not remember which kind takes which
// fields, plus a filter that keeps only what the request allows (the gate would drop the rest
// with a note in the PrestartRun).
import type { Contribution, HookRequest } from './types.ts';

/** Secret keys as environment variables: env maps VARIABLE -> key in the Secret. */
export function envContribution(name: string, secretName: string, env: Record<string, string>): Contribution {
  return { name, secretName, as: 'env', env: { ...env } };
}

/** Every key of the Secret as an environment variable of the same name. */
export function envFromContribution(name: string, secretName: string): Contribution {
  return { name, secretName, as: 'envFrom' };
}

/** The Secret mounted at $SERVICE_BINDING_ROOT/<name> (servicebinding.io). */
export function volumeContribution(name: string, secretName: string): Contribution {
  return { name, secretName, as: 'volume' };
}

export function allowedOnly(request: Pick<HookRequest, 'allowedContributions'>, contributions: readonly Contribution[]): Contribution[] {
  return contributions.filter((c) => request.allowedContributions.includes(c.as));
}
