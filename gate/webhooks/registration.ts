// Keeps the gate's MutatingWebhookConfiguration equal to what this gate serves (its caBundle, URL
// or Service, selectors), so a fresh install, a rewritten configuration and a renewed CA all
// converge to the same object. Writes only when it differs: every replica calls this on start and
// on each certificate check. The release ships the configuration (config/400-webhooks.yaml) and the
// gate may only read and update it by name: creating one is tried (a developer's gate may hold the
// right) but the installed RBAC refuses it, and the error says to apply the release.
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
        try {
          await api.createMutatingWebhookConfiguration({ body: desired });
        } catch (err) {
          if (statusOf(err) !== 403) throw err;
          throw new Error(
            `MutatingWebhookConfiguration ${options.name} does not exist and the gate may not create one ` +
              `(${errorLine(err)}): apply it as the release does (config/400-webhooks.yaml, in knative-prestart.yaml` +
              `${options.name === 'knative-prestart' ? '' : `, renamed ${options.name}`}); the gate then keeps it current`,
          );
        }
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
          `the gate may not read or write MutatingWebhookConfiguration ${options.name} (${errorLine(err)}); ` +
            `RBAC limits get/update/patch by name: a gate instance other than "default" needs its own rule ` +
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
