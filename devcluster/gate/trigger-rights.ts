// What an admin does for each namespace a Broker for hooks lives in (config/300-rbac.yaml): bind
// the gate's right to write Triggers there, and nowhere else.
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { applyManifests } from '../apply.ts';
import { waitFor } from '../wait.ts';

export const GATE_TRIGGERS_ROLE = 'knative-prestart-gate-triggers';
const GATE_SA = { namespace: 'knative-prestart', name: 'knative-prestart-gate' };

/** Binds the role in `namespace` and returns once the apiserver's authorizer grants it (its RBAC cache lags a write). */
export async function allowGateTriggers(admin: KubeConfig, namespace: string): Promise<void> {
  await applyManifests(
    admin,
    JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: GATE_TRIGGERS_ROLE, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: GATE_TRIGGERS_ROLE },
      subjects: [{ kind: 'ServiceAccount', ...GATE_SA }],
    }),
  );
  const authz = admin.makeApiClient(AuthorizationV1Api);
  await waitFor(
    async () => {
      const review = await authz.createSubjectAccessReview({
        body: {
          spec: {
            user: `system:serviceaccount:${GATE_SA.namespace}:${GATE_SA.name}`,
            groups: ['system:serviceaccounts', `system:serviceaccounts:${GATE_SA.namespace}`, 'system:authenticated'],
            resourceAttributes: { group: 'eventing.knative.dev', resource: 'triggers', verb: 'create', namespace },
          },
        },
      });
      return review.status?.allowed === true;
    },
    { timeoutMs: 30_000, what: `the gate's right to write Triggers in ${namespace} to take effect` },
  );
}
