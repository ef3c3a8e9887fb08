// An identity with exactly the gate's permissions, copied from the RBAC installed on the cluster
// when the test runs, whose rules the test narrows and widens while a gate runs as it: the way to
// take one permission away from "the gate" without touching the real gate identity, which every
// test file shares (RBAC has no deny rule).
import { randomBytes } from 'node:crypto';
import { GATE_USER, type GateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import {
  AuthorizationV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type RbacV1Subject,
  type V1ClusterRole,
  type V1PolicyRule,
  type V1Role,
} from '@kubernetes/client-node';

export interface Permission {
  /** API group; '' is the core group. */
  group: string;
  resource: string;
  verb: string;
}

export interface GateIdentity {
  user: string;
  kubeConfig: KubeConfig;
  /** Takes the permissions away; resolves once the apiserver's authorizer refuses them. */
  revoke(...permissions: Permission[]): Promise<void>;
  /** Gives back everything revoked; resolves once the authorizer allows it again. */
  restore(): Promise<void>;
  /** Deletes the copied roles and bindings. */
  delete(): Promise<void>;
}

const isGate = (s: RbacV1Subject) => s.kind === 'ServiceAccount' && `system:serviceaccount:${s.namespace}:${s.name}` === GATE_USER;

/** A copy of the gate's identity for `env`'s instance: its cluster-wide roles, its namespaced roles, its own webhook rule. */
export async function copyGateIdentity(env: GateEnv): Promise<GateIdentity> {
  const rbac = env.admin.makeApiClient(RbacAuthorizationV1Api);
  const user = `limited-gate-${env.instance}-${randomBytes(2).toString('hex')}`;
  const subjects: RbacV1Subject[] = [{ kind: 'User', name: user, apiGroup: 'rbac.authorization.k8s.io' }];
  // Per-instance webhook rules are bound to the gate identity too: keep only this instance's.
  const otherInstance = (name: string) => name.startsWith('knative-prestart-gate-webhook-') && !name.endsWith(`-${env.instance}`);

  const clusterRoles: V1ClusterRole[] = [];
  for (const binding of (await rbac.listClusterRoleBinding()).items) {
    if (!binding.subjects?.some(isGate) || otherInstance(binding.metadata?.name ?? '')) continue;
    const role = await rbac.readClusterRole({ name: binding.roleRef.name });
    const copy = await rbac.createClusterRole({ body: { metadata: { name: `${user}-${clusterRoles.length}` }, rules: role.rules ?? [] } });
    clusterRoles.push(copy);
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: copy.metadata?.name ?? '' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: copy.metadata?.name ?? '' },
        subjects,
      },
    });
  }
  const roles: V1Role[] = [];
  for (const binding of (await rbac.listRoleBindingForAllNamespaces()).items) {
    const namespace = binding.metadata?.namespace ?? '';
    // The gate's own namespace and this env's: other test files bind the gate in theirs (the
    // Trigger role), and those namespaces come and go while this runs.
    if (!binding.subjects?.some(isGate) || (namespace !== env.namespace && namespace !== 'knative-prestart')) continue;
    const rules =
      binding.roleRef.kind === 'Role'
        ? (await rbac.readNamespacedRole({ namespace, name: binding.roleRef.name })).rules
        : (await rbac.readClusterRole({ name: binding.roleRef.name })).rules;
    const name = `${user}-${roles.length}`;
    roles.push(await rbac.createNamespacedRole({ namespace, body: { metadata: { name, namespace }, rules: rules ?? [] } }));
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: { metadata: { name, namespace }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name }, subjects },
    });
  }
  const original = {
    cluster: clusterRoles.map((r) => structuredClone(r.rules ?? [])),
    namespaced: roles.map((r) => structuredClone(r.rules ?? [])),
  };
  const revoked: Permission[] = [];

  const kubeconfigPath = await env.cluster.mintUserKubeconfig(user, ['system:authenticated']);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);

  const write = async (without: Permission[]) => {
    for (const [i, role] of clusterRoles.entries()) {
      const name = role.metadata?.name ?? '';
      await rbac.patchClusterRole({ name, body: [{ op: 'replace', path: '/rules', value: narrow(original.cluster[i] ?? [], without) }] });
    }
    for (const [i, role] of roles.entries()) {
      const name = role.metadata?.name ?? '';
      const namespace = role.metadata?.namespace ?? '';
      await rbac.patchNamespacedRole({
        name,
        namespace,
        body: [{ op: 'replace', path: '/rules', value: narrow(original.namespaced[i] ?? [], without) }],
      });
    }
  };
  const authz = env.admin.makeApiClient(AuthorizationV1Api);
  const allowed = async (p: Permission) =>
    (
      await authz.createSubjectAccessReview({
        body: {
          spec: {
            user,
            groups: ['system:authenticated'],
            resourceAttributes: { group: p.group, resource: p.resource, verb: p.verb, namespace: '' },
          },
        },
      })
    ).status?.allowed === true;
  const settle = (permissions: Permission[], want: boolean) =>
    waitFor(async () => (await Promise.all(permissions.map(allowed))).every((a) => a === want), {
      what: `the authorizer to ${want ? 'allow' : 'refuse'} ${permissions.map((p) => `${p.verb} ${p.resource}`).join(', ')} for ${user}`,
    });

  return {
    user,
    kubeConfig,
    async revoke(...permissions) {
      revoked.push(...permissions);
      await write(revoked);
      await settle(permissions, false);
    },
    async restore() {
      const back = revoked.splice(0);
      await write([]);
      await settle(back, true);
    },
    async delete() {
      for (const role of clusterRoles) {
        const name = role.metadata?.name ?? '';
        await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
        await rbac.deleteClusterRole({ name }).catch(() => undefined);
      }
      for (const role of roles) {
        const name = role.metadata?.name ?? '';
        const namespace = role.metadata?.namespace ?? '';
        await rbac.deleteNamespacedRoleBinding({ name, namespace }).catch(() => undefined);
        await rbac.deleteNamespacedRole({ name, namespace }).catch(() => undefined);
      }
    },
  };
}

/** The rules without the given permissions (a rule naming several resources is split). */
function narrow(rules: V1PolicyRule[], without: Permission[]): V1PolicyRule[] {
  const out: V1PolicyRule[] = [];
  for (const rule of rules) {
    for (const resource of rule.resources ?? []) {
      const groups = rule.apiGroups ?? [];
      const verbs = rule.verbs.filter(
        (verb) => !without.some((p) => p.resource === resource && p.verb === verb && groups.includes(p.group)),
      );
      if (verbs.length > 0) out.push({ ...rule, resources: [resource], verbs });
    }
    if ((rule.resources ?? []).length === 0) out.push(rule);
  }
  return out;
}
