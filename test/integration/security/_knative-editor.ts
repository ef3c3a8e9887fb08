// A namespace editor as a cluster with Knative Serving installed has one: Kubernetes' `edit`,
// with Knative's knative-serving-namespaced-edit aggregated into it (Knative's
// config/core/200-roles/clusterrole-namespaced.yaml: serving.knative.dev resources "*", which
// covers every status subresource). The integration cluster installs Knative's CRDs only, and
// other test files share it, so Knative's rules are copied into a ClusterRole of this test's own,
// without the aggregation label, and bound in one namespace: `edit` everywhere else stays as it is.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import { knativeServingModuleDir } from '@knative-prestart/devcluster/knative.ts';
import { type KubeConfig, RbacAuthorizationV1Api, type V1PolicyRule } from '@kubernetes/client-node';

const KNATIVE_EDIT = 'knative-serving-namespaced-edit';

/** Knative Serving's own rules for namespace editors, as its release ships them. */
export async function knativeEditRules(): Promise<V1PolicyRule[]> {
  const file = join(await knativeServingModuleDir(), 'config', 'core', '200-roles', 'clusterrole-namespaced.yaml');
  const role = parseManifests(await readFile(file, 'utf8')).find((m) => m.kind === 'ClusterRole' && m.metadata?.name === KNATIVE_EDIT);
  if (!role) throw new Error(`${file} has no ClusterRole ${KNATIVE_EDIT}`);
  return (role as unknown as { rules: V1PolicyRule[] }).rules;
}

/**
 * Binds `user` in `namespace` to `edit` and to a copy of Knative's editor rules (ClusterRole
 * `roleName`, which the returned function deletes).
 */
export async function bindKnativeEditor(
  admin: KubeConfig,
  namespace: string,
  user: string,
  roleName: string,
): Promise<() => Promise<void>> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({ body: { metadata: { name: roleName }, rules: await knativeEditRules() } });
  const subjects = [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }];
  for (const [name, role] of [
    [`${user}-edit`, 'edit'],
    [`${user}-knative-edit`, roleName],
  ] as const) {
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: { metadata: { name }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects },
    });
  }
  return async () => {
    await rbac.deleteClusterRole({ name: roleName }).catch(() => undefined);
  };
}
