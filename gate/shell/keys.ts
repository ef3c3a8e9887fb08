// The correlation key ring lives in a Secret so every replica (and a restarted gate) verifies
// the replyids minted before. The first replica to start creates it; rotation = put a new key
// first under `keys` (comma-separated hex) and keep the old one after it until old runs ended.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { isConflict, isNotFound } from '../../api/kube-errors.ts';
import { KeyRing } from '../../schemas/index.ts';

export const CORRELATION_SECRET = 'knative-prestart-correlation-keys';

export async function loadOrCreateKeyRing(kc: KubeConfig, namespace: string): Promise<KeyRing> {
  const core = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < 3; i++) {
    try {
      const secret = await core.readNamespacedSecret({ name: CORRELATION_SECRET, namespace });
      const hex = Buffer.from(secret.data?.keys ?? '', 'base64').toString('utf8');
      return KeyRing.fromHex(
        ...hex
          .split(',')
          .map((k) => k.trim())
          .filter(Boolean),
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    try {
      const key = Buffer.from(KeyRing.generateKey()).toString('hex');
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: CORRELATION_SECRET, namespace, labels: { 'app.kubernetes.io/part-of': 'knative-prestart' } },
          type: 'Opaque',
          data: { keys: Buffer.from(key).toString('base64') },
        },
      });
      return KeyRing.fromHex(key);
    } catch (err) {
      // Another replica created it first: read theirs.
      if (!isConflict(err)) throw err;
    }
  }
  throw new Error(`could not read or create Secret ${namespace}/${CORRELATION_SECRET}`);
}
