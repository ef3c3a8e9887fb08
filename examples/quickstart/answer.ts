// The end of the real-node demo: the app answers a real HTTP request, sent as the Route would
// send it (no networking layer runs here) to Knative's activator, which forwards it to the
// Revision's pod. The test app answers with its environment, so the answer shows the binding.

import { KNATIVE_NAMESPACE } from '@knative-prestart/devcluster/knative-serving-pods.ts';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { DemoTarget } from './milestones.ts';

interface TestAppAnswer {
  hostname: string;
  env: Record<string, string>;
}

/** One line: the HTTP status, the pod that answered and the binding's variables it saw. */
export async function askTheApp(kc: KubeConfig, demo: DemoTarget): Promise<string> {
  const service = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'services',
    namespace: demo.namespace,
    name: demo.service,
  })) as { status?: { latestReadyRevisionName?: string } };
  const revision = service.status?.latestReadyRevisionName ?? demo.revision;
  const activator = await kc.makeApiClient(CoreV1Api).readNamespacedService({ name: 'activator-service', namespace: KNATIVE_NAMESPACE });
  const url = `http://${activator.spec?.clusterIP}:80/`;
  const res = await fetch(url, {
    headers: { 'Knative-Serving-Revision': revision, 'Knative-Serving-Namespace': demo.namespace },
    signal: AbortSignal.timeout(60_000),
  });
  if (res.status !== 200)
    throw new Error(`the app answered ${res.status} through the activator (${url}): ${(await res.text()).slice(0, 200)}`);
  const answer = (await res.json()) as TestAppAnswer;
  const bound = Object.keys(answer.env)
    .filter((k) => k.startsWith('DATABASE_'))
    .sort();
  // The password stays out of the terminal: the scheme, user and host say where the binding points.
  const databaseUrl = answer.env.DATABASE_URL?.replace(/^([a-z]+:\/\/[^:/@]+):[^@]*@/, '$1:***@');
  return (
    `the app answers through Knative's activator (${url}, Knative-Serving-Revision: ${revision}): HTTP 200 from pod ${answer.hostname}, ` +
    `with its binding in the environment: ${bound.join(', ') || 'none'}${databaseUrl ? ` (DATABASE_URL=${databaseUrl})` : ''}`
  );
}
