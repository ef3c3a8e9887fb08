// PrestartHooks for the Trigger tests.
import type { HookDelivery } from '../../../api/types.ts';
import type { Destination, OwnedHook } from '../../../triggers/desired.ts';

export function brokerHook(name: string, broker: { name: string; namespace: string; subscriber: Destination }, uid?: string): OwnedHook {
  return hookWith(name, { transport: 'broker', broker }, uid);
}

export function hookWith(name: string, delivery: HookDelivery, uid?: string): OwnedHook {
  return {
    name,
    generation: 1,
    spec: { match: {}, order: 0, timeout: '10m', failurePolicy: 'Fail', resendInterval: '30s', delivery },
    ...(uid ? { uid } : {}),
  };
}

export const GATE: Destination = { uri: 'http://127.0.0.1:8080/events' };
