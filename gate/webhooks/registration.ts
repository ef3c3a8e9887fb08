// Creates or updates the gate's MutatingWebhookConfiguration, so a fresh install, a deleted
// configuration and a renewed CA all converge to the same object. Writes only when it differs:
// every replica may call this on start and on each certificate change.
import { AdmissionregistrationV1Api, type KubeConfig, type V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import { errorLine, isConflict, isNotFound, statusOf } from '../../api/kube-errors.ts';
import { buildWebhookConfiguration, sameWebhookConfiguration, type WebhookConfigurationOptions } from './webhook-configuration.ts';

export type RegistrationResult = 'created' | 'updated' | 'unchanged';

const MAX_ATTEMPTS = 5;

export async function ensureWebhookConfiguration(
  kc: KubeConfig,
  options: WebhookConfigurationOptions & { caBundle: string },
): Promise<RegistrationResult> {
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  const desired = buildWebhookConfiguration(options);
  for (let attempt = 1; ; attempt++) {
    try {
      const actual = await readConfiguration(api, options.name);
      if (!actual) {
        await api.createMutatingWebhookConfiguration({ body: desired });
        return 'created';
      }
      if (sameWebhookConfiguration(desired, actual)) return 'unchanged';
      const body: V1MutatingWebhookConfiguration = {
        ...actual,
        metadata: { ...actual.metadata, labels: { ...actual.metadata?.labels, ...desired.metadata?.labels } },
        webhooks: desired.webhooks ?? [],
      };
      await api.replaceMutatingWebhookConfiguration({ name: options.name, body });
      return 'updated';
    } catch (err) {
      // 409: another replica created or updated it between our read and write; look again.
      if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
      if (statusOf(err) === 403) {
        throw new Error(
          `the gate may not write MutatingWebhookConfiguration ${options.name} (${errorLine(err)}); ` +
            `RBAC limits update/patch by name: a gate instance other than "default" needs its own rule ` +
            `(resourceNames: [${options.name}], see config/300-rbac.yaml)`,
        );
      }
      throw err;
    }
  }
}

async function readConfiguration(api: AdmissionregistrationV1Api, name: string): Promise<V1MutatingWebhookConfiguration | undefined> {
  try {
    return await api.readMutatingWebhookConfiguration({ name });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
