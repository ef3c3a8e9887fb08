// A run keeps the hook spec it started with, so editing a PrestartHook never changes the rules
// for a Revision that is already being held.

import type { HookSnapshot, PrestartHook } from '../../api/types.ts';
import { parseDurationSeconds } from './duration.ts';
import { hookKind } from './namespaced-hooks.ts';
import { retryLimitsFromSpec } from './retry-after.ts';

export class HookSpecError extends Error {
  constructor(
    readonly hook: string,
    detail: string,
  ) {
    super(`${hookKind(hook)} ${hook} is invalid: ${detail}`);
    this.name = 'HookSpecError';
  }
}

/** Throws HookSpecError when a duration cannot be parsed or is out of range. */
export function snapshotHook(hook: PrestartHook): HookSnapshot {
  const { spec } = hook;
  // A namespaced hook the gate will not run (gate/core/namespaced-hooks.ts): fail closed.
  if (hook.problem !== undefined) throw new HookSpecError(hook.name, hook.problem);
  const timeoutSeconds = seconds(hook.name, 'timeout', spec.timeout);
  if (timeoutSeconds <= 0) throw new HookSpecError(hook.name, `timeout must be positive, got "${spec.timeout}"`);
  const resendIntervalSeconds = seconds(hook.name, 'resendInterval', spec.resendInterval);
  // Zero means "never re-send"; negative is a typo, not a wish.
  if (resendIntervalSeconds < 0) {
    throw new HookSpecError(hook.name, `resendInterval must not be negative, got "${spec.resendInterval}"`);
  }
  const snapshot: HookSnapshot = {
    name: hook.name,
    order: spec.order ?? 0,
    timeoutSeconds,
    resendIntervalSeconds,
    failurePolicy: spec.failurePolicy ?? 'Fail',
    allowedContributions: [...(spec.contributions?.allowed ?? [])],
    delivery: structuredClone(spec.delivery),
  };
  if (spec.params !== undefined) snapshot.params = structuredClone(spec.params);
  if (spec.heartbeatTimeout !== undefined) {
    const heartbeat = seconds(hook.name, 'heartbeatTimeout', spec.heartbeatTimeout);
    if (heartbeat <= 0) throw new HookSpecError(hook.name, `heartbeatTimeout must be positive, got "${spec.heartbeatTimeout}"`);
    snapshot.heartbeatTimeoutSeconds = heartbeat;
  }
  if (spec.mode === 'Audit') snapshot.mode = 'Audit';
  try {
    const retryAfter = retryLimitsFromSpec(spec.retryAfter, (field, text) => seconds(hook.name, field, text));
    if (retryAfter) snapshot.retryAfter = retryAfter;
  } catch (err) {
    if (err instanceof HookSpecError) throw err;
    throw new HookSpecError(hook.name, (err as Error).message);
  }
  return snapshot;
}

function seconds(hook: string, field: string, text: string): number {
  try {
    return parseDurationSeconds(text);
  } catch (err) {
    throw new HookSpecError(hook, `${field}: ${(err as Error).message}`);
  }
}
