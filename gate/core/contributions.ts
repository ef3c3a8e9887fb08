// Checks on what a hook asks to project into the Revision's pods. A hook may only contribute the
// kinds its PrestartHook allows, and every name must be valid where the Pod webhook puts it, so a
// bad reply cannot make the Revision's pods unschedulable.
import { isDns1123Label, isDns1123Subdomain } from '../../api/names.ts';
import type { Contribution, ContributionKind } from '../../api/types.ts';

// Kubernetes validation for env var names and Secret keys.
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;

/** Volumes are named `prestart-<name>` and volume names are DNS-1123 labels of at most 63 characters. */
export const VOLUME_PREFIX = 'prestart-';
const MAX_NAME = 63 - VOLUME_PREFIX.length;

export interface FilteredContributions {
  kept: Contribution[];
  /** One line per dropped contribution, saying why. */
  dropped: string[];
}

export function filterContributions(contributions: readonly unknown[], allowed: readonly ContributionKind[]): FilteredContributions {
  const kept: Contribution[] = [];
  const dropped: string[] = [];
  const names = new Set<string>();
  for (const [i, raw] of contributions.entries()) {
    const c = raw as Partial<Contribution> | null;
    const label = typeof c?.name === 'string' && c.name !== '' ? c.name : `#${i}`;
    const problem = contributionProblem(c, allowed) ?? (names.has(label) ? 'duplicate name' : undefined);
    if (problem) {
      dropped.push(`${label}: ${problem}`);
      continue;
    }
    const valid = c as Contribution;
    names.add(valid.name);
    const copy: Contribution = { name: valid.name, secretName: valid.secretName, as: valid.as };
    if (valid.as === 'env') copy.env = { ...valid.env };
    kept.push(copy);
  }
  return { kept, dropped };
}

function contributionProblem(c: Partial<Contribution> | null, allowed: readonly ContributionKind[]): string | undefined {
  if (typeof c !== 'object' || c === null) return 'not an object';
  if (typeof c.name !== 'string' || !isDns1123Label(c.name) || c.name.length > MAX_NAME) {
    return `name must be a DNS-1123 label of at most ${MAX_NAME} characters`;
  }
  if (typeof c.secretName !== 'string' || !isDns1123Subdomain(c.secretName)) {
    return 'secretName must be a DNS-1123 subdomain';
  }
  if (c.as !== 'env' && c.as !== 'envFrom' && c.as !== 'volume') return `unknown kind ${JSON.stringify(c.as)}`;
  if (!allowed.includes(c.as)) {
    return `kind ${c.as} not allowed (allowed: ${allowed.length > 0 ? allowed.join(', ') : 'none'})`;
  }
  if (c.as === 'env') {
    const env = c.env;
    if (typeof env !== 'object' || env === null || Object.keys(env).length === 0) return 'as=env needs a non-empty env map';
    for (const [name, key] of Object.entries(env)) {
      if (!ENV_NAME.test(name)) return `invalid env var name ${JSON.stringify(name)}`;
      if (typeof key !== 'string' || key.length > 253 || !SECRET_KEY.test(key)) {
        return `invalid Secret key ${JSON.stringify(key)} for ${name}`;
      }
    }
  }
  return undefined;
}
