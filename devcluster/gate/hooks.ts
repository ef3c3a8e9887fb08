// PrestartHooks for a test gate's namespace: written with the defaults a test rarely changes,
// matching that namespace's Revisions, and deleted when the env stops (they are cluster-scoped,
// so a leftover one would hold Revisions of no test at all, but clutter every gate's cache).
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { HOOKS, REVISIONS, type RevisionObject } from '../../api/resources.ts';
import { HOOKS_ANNOTATION, type PrestartHookSpec } from '../../api/types.ts';
import { waitFor } from '../wait.ts';

/** A hook's spec as a test writes it: its delivery, and whatever differs from the defaults. */
export type HookOverrides = Partial<PrestartHookSpec> & Pick<PrestartHookSpec, 'delivery'>;

export interface HookMethods {
  /** Creates PrestartHook `name`: `spec` over defaults that match every Revision of this namespace. */
  createHook(name: string, spec: HookOverrides): Promise<void>;
  /** Deletes a hook now (stop() deletes the rest); a missing one is fine. */
  deleteHook(name: string): Promise<void>;
  /** A hook's match: Revisions of this namespace that carry annotation `key` (with `value`, when given). */
  annotationMatch(key: string, value?: string): PrestartHookSpec['match'];
  /**
   * Waits until a Revision carrying `annotations` is stamped with `hook`, by the apiserver (its
   * stamp policy, config/230) or the gate's webhook: a hook created a moment ago is not in their
   * caches yet (the gate waits for a stamped hook its cache has not seen). Uses a dry-run create,
   * which runs every admission webhook and stores nothing. The probe names no Configuration:
   * Knative's own validation (when it runs, as in the e2e suite) refuses a
   * serving.knative.dev/configuration label without the matching owner reference.
   */
  waitUntilStamped(hook: string, annotations: Record<string, string>): Promise<void>;
}

export function hookMethods(admin: KubeConfig, namespace: string): HookMethods & { deleteCreatedHooks(): Promise<void> } {
  const custom = admin.makeApiClient(CustomObjectsApi);
  const created = new Set<string>();
  const inNamespace = { matchLabels: { 'kubernetes.io/metadata.name': namespace } };
  const methods = {
    async createHook(name: string, spec: HookOverrides) {
      const full: PrestartHookSpec = {
        match: { namespaceSelector: inNamespace },
        order: 0,
        timeout: '2m',
        resendInterval: '30s',
        failurePolicy: 'Fail',
        ...spec,
      };
      await custom.createClusterCustomObject({
        ...HOOKS,
        body: { apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', metadata: { name }, spec: full },
      });
      created.add(name);
    },
    async deleteHook(name: string) {
      created.delete(name);
      await custom.deleteClusterCustomObject({ ...HOOKS, name }).catch(() => undefined);
    },
    annotationMatch(key: string, value?: string): PrestartHookSpec['match'] {
      return { annotation: value === undefined ? { key } : { key, value }, namespaceSelector: inNamespace };
    },
    async waitUntilStamped(hook: string, annotations: Record<string, string>) {
      await waitFor(
        async () => {
          const rev = (await custom.createNamespacedCustomObject({
            ...REVISIONS,
            namespace,
            dryRun: 'All',
            body: {
              apiVersion: 'serving.knative.dev/v1',
              kind: 'Revision',
              metadata: { name: `stamp-probe-${Date.now()}`, annotations },
              spec: { containers: [{ image: 'dev.local/demo/app:v1' }] },
            },
          })) as RevisionObject;
          return (JSON.parse(rev.metadata?.annotations?.[HOOKS_ANNOTATION] ?? '[]') as string[]).includes(hook);
        },
        { timeoutMs: 30_000, what: `new Revisions to be stamped with hook ${hook}` },
      );
    },
    async deleteCreatedHooks() {
      await Promise.all([...created].map((name) => methods.deleteHook(name)));
    },
  };
  return methods;
}
