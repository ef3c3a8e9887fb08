// Phase 5's objects, as a platform admin and an app team would create them: the PrestartHook
// that sends matching Revisions to the example hook, the app's namespace, and the Knative
// Service whose template carries the annotation the hook matches.

import { Knative, type KnativeObject } from '@knative-prestart/devcluster/knative-client.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { PrestartHookSpec } from '../../api/types.ts';
import type { DemoTarget } from './milestones.ts';

export const BINDING_ANNOTATION = 'serving-binding';

export interface Demo extends DemoTarget {
  hook: string;
}

export const DEMO: Demo = { namespace: 'demo', service: 'demo', revision: 'demo-00001', hook: 'demo-db' };

/** The Broker the hook bus uses in `--broker` mode. */
export interface DemoBroker {
  name: string;
  namespace: string;
}

export function hookSpec(hookUrl: string, demo: Demo, broker?: DemoBroker): PrestartHookSpec {
  return {
    match: { annotation: { key: BINDING_ANNOTATION, value: demo.hook } },
    order: 0,
    timeout: '5m',
    failurePolicy: 'Fail',
    resendInterval: '30s',
    params: { secretName: demo.hook },
    contributions: { allowed: ['env', 'volume'] },
    delivery: broker ? { transport: 'broker', broker: { ...broker, subscriber: { uri: hookUrl } } } : { transport: 'http', url: hookUrl },
  };
}

/** The app's namespace (the Broker of `--broker` lives there too). */
export async function createDemoNamespace(kc: KubeConfig, demo: Demo): Promise<void> {
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: demo.namespace } } })
    .catch((err: unknown) => {
      if (!(err instanceof ApiException && err.code === 409)) throw err;
    });
}

/** The namespace and the hook; the example hook creates the Secret its binding names when it runs. */
export async function prepareDemo(kc: KubeConfig, demo: Demo, hookUrl: string, broker?: DemoBroker): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  await createDemoNamespace(kc, demo);
  await custom.createClusterCustomObject({
    group: 'prestart.dev',
    version: 'v1alpha1',
    plural: 'prestarthooks',
    body: {
      apiVersion: 'prestart.dev/v1alpha1',
      kind: 'PrestartHook',
      metadata: { name: demo.hook },
      spec: hookSpec(hookUrl, demo, broker),
    },
  });
  // A hook created a moment ago is not in the gate's cache yet: wait until its webhook stamps a
  // dry-run Revision (runs every admission webhook, stores nothing), so the real one is held.
  await waitFor(
    async () => {
      const rev = (await custom.createNamespacedCustomObject({
        group: 'serving.knative.dev',
        version: 'v1',
        plural: 'revisions',
        namespace: demo.namespace,
        dryRun: 'All',
        body: {
          apiVersion: 'serving.knative.dev/v1',
          kind: 'Revision',
          metadata: { name: `stamp-probe-${Date.now()}`, annotations: { [BINDING_ANNOTATION]: demo.hook } },
          spec: { containers: [{ image: 'dev.local/demo/app:v1' }] },
        },
      })) as KnativeObject;
      return (JSON.parse(rev.metadata?.annotations?.['prestart.dev/hooks'] ?? '[]') as string[]).includes(demo.hook);
    },
    { timeoutMs: 30_000, what: `the gate's webhook to apply PrestartHook ${demo.hook}` },
  );
  if (broker) await waitForTriggers(kc, broker);
}

/**
 * `--broker`: the gate's request and reply Triggers Ready on the Broker. A request sent before
 * the channel has the Trigger's subscription is accepted and dropped by the InMemoryChannel (it
 * is not durable), and only the gate's resend, 30 s later, would bring it to the hook.
 */
export async function waitForTriggers(kc: KubeConfig, broker: DemoBroker): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  await waitFor(
    async () => {
      const list = (await custom.listNamespacedCustomObject({
        group: 'eventing.knative.dev',
        version: 'v1',
        plural: 'triggers',
        namespace: broker.namespace,
        labelSelector: 'app.kubernetes.io/managed-by=knative-prestart',
      })) as { items: { status?: { conditions?: { type: string; status: string }[] } }[] };
      const ready = list.items.filter((t) => t.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      return ready.length >= 2;
    },
    { timeoutMs: 60_000, what: `the gate's request and reply Triggers on Broker ${broker.namespace}/${broker.name} to be Ready` },
  );
}

/**
 * On the real node, `kn service create demo --image <the test app> --annotation serving-binding=demo-db`
 * as it is typed (Knative's default autoscaler, the KPA, runs there). On kwok, the HPA class
 * (no KPA runs without pod IPs) and an image no container is made of.
 */
export async function createDemoService(kc: KubeConfig, demo: Demo, realImage?: string): Promise<void> {
  if (!realImage) {
    await new Knative(kc, demo.namespace).createService(demo.service, { annotations: { [BINDING_ANNOTATION]: demo.hook } });
    return;
  }
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'services',
    namespace: demo.namespace,
    body: {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Service',
      metadata: { name: demo.service },
      spec: {
        template: { metadata: { annotations: { [BINDING_ANNOTATION]: demo.hook } }, spec: { containers: [{ image: realImage }] } },
      },
    },
  });
}
