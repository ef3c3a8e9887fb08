// Kubernetes plumbing shared by the built-in hooks: where the identity comes from, and which
// API errors are worth another try.
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { errorLine, statusOf } from '../../../api/kube-errors.ts';

export { errorLine, statusOf };

/** A kubeconfig file when given; otherwise $KUBECONFIG, ~/.kube/config, then the in-cluster service account. */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}

/** Network errors, 5xx, 408 and 429 pass; anything else (403, 404, 422, a bug) will not fix itself. */
export function isTransient(err: unknown): boolean {
  if (err instanceof ApiException) return err.code >= 500 || err.code === 408 || err.code === 429;
  const e = err as { name?: unknown; code?: unknown; type?: unknown };
  return e?.name === 'FetchError' || e?.type === 'system' || (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code));
}

/**
 * What an admin runs when the hook may not act in `namespace`: its namespace rights (Jobs,
 * Secrets) are bound per namespace, never cluster-wide (config/600-builtin-hooks.yaml).
 */
export function namespaceGrantHint(kind: 'job' | 'secret', namespace: string): string {
  return (
    `the hook's identity is not bound in ${namespace}; an admin grants it with: kubectl create rolebinding prestart-hook-${kind} -n ${namespace} ` +
    `--clusterrole=knative-prestart-hook-${kind}-namespace --serviceaccount=knative-prestart:prestart-hook-${kind} (config/600-builtin-hooks.yaml)`
  );
}
