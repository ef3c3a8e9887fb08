// The secret hook's params, checked before it starts waiting.
import type { ContributionKind } from '../../../api/types.ts';
import { ParamReader } from '../common/params.ts';

const KINDS = ['env', 'envFrom', 'volume'] as const;

export interface SecretParams {
  /** The Secret's name; may hold {{revision}}, {{service}}, {{configuration}}, {{namespace}}. */
  secretName: string;
  /** Keys the Secret must have before the hook succeeds (with as: env, the keys env names are added). */
  requiredKeys: string[];
  /** How the Secret reaches the Revision's pods; default volume, or the first kind the hook allows. */
  as?: ContributionKind;
  /** as: env: VARIABLE -> key in the Secret. */
  env?: Record<string, string>;
  /** The contribution's name (the volume is mounted at $SERVICE_BINDING_ROOT/<name>); default the Secret's name. */
  bindingName?: string;
}

export function readSecretParams(params: Record<string, unknown>): SecretParams | string[] {
  const r = new ParamReader(params);
  const secretName = r.string('secretName', { required: true });
  const as = r.oneOf('as', KINDS);
  const env = r.stringMap('env');
  if (as === 'env' && env === undefined && !r.problems.some((p) => p.startsWith('params.env'))) {
    r.problem('params.env ({VARIABLE: "key"}) is required with as: env');
  }
  if (env !== undefined && as !== 'env') r.problem('params.env is only for as: env');
  const out: SecretParams = { secretName: secretName ?? '', requiredKeys: r.strings('requiredKeys') ?? [] };
  if (as !== undefined) out.as = as;
  if (env !== undefined) out.env = env;
  const bindingName = r.string('bindingName');
  if (bindingName !== undefined) out.bindingName = bindingName;
  return r.problems.length > 0 ? r.problems : out;
}

/** The kind to contribute: params.as when the hook allows it; without params.as, volume if allowed, else the first allowed. */
export function chooseKind(
  as: ContributionKind | undefined,
  allowed: readonly ContributionKind[],
): { kind: ContributionKind } | { error: string } {
  if (as !== undefined) {
    if (allowed.includes(as)) return { kind: as };
    const which = allowed.length > 0 ? `only ${allowed.join(', ')}` : 'no contributions';
    return { error: `params.as is ${as}, but the PrestartHook allows ${which} (spec.contributions.allowed)` };
  }
  const kind = allowed.includes('volume') ? 'volume' : allowed[0];
  return kind
    ? { kind }
    : { error: 'the PrestartHook allows no contributions (spec.contributions.allowed): nothing to bind the Secret as' };
}

/** Every key the Secret must hold: the required ones and those env refers to. */
export function keysNeeded(p: SecretParams): string[] {
  return [...new Set([...p.requiredKeys, ...Object.values(p.env ?? {})])];
}
