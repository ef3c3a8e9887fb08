// The PrestartHooks as the Trigger wiring needs them: with their uids, without those being deleted.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { HOOKS, type HookObject, toHook } from '../api/resources.ts';
import type { OwnedHook } from './desired.ts';

export async function listOwnedHooks(api: CustomObjectsApi): Promise<OwnedHook[]> {
  const list = (await api.listClusterCustomObject({ group: HOOKS.group, version: HOOKS.version, plural: HOOKS.plural })) as {
    items: HookObject[];
  };
  // A hook being deleted no longer needs Triggers, whatever finalizers keep it visible.
  return list.items.filter((h) => !h.metadata?.deletionTimestamp).map((h) => ({ ...toHook(h), uid: h.metadata?.uid }));
}
