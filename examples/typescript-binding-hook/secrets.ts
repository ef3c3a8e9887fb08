// Where the example keeps the credentials it "provisions": a Secret in the Revision's namespace,
// created once and then left alone, so a resent request (or a second Revision of the same
// Service) gets the same credentials instead of a rotated password under a running app.
import { randomBytes } from 'node:crypto';
import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

export interface SecretStore {
  /** Creates the Secret unless it exists; never changes an existing one. */
  ensure(namespace: string, name: string, data: () => Record<string, string>): Promise<'created' | 'existing'>;
}

export function kubernetesSecrets(kc: KubeConfig): SecretStore {
  const core = kc.makeApiClient(CoreV1Api);
  return {
    async ensure(namespace, name, data) {
      try {
        await core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'provision-db-example' } },
            stringData: data(),
          },
        });
        return 'created';
      } catch (err) {
        if (err instanceof ApiException && err.code === 409) return 'existing';
        throw err;
      }
    },
  };
}

/** Credentials for a database named after the Service (a fresh password each time it is asked). */
export function credentials(database: string, namespace: string): () => Record<string, string> {
  return () => {
    const password = randomBytes(18).toString('base64url');
    return { uri: `postgres://app:${password}@${database}.${namespace}.db.internal:5432/app`, password };
  };
}
