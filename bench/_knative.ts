// Objects shaped like those of a cluster where Knative Serving and the gate have run for a while,
// for bench/scale.ts: a Revision's status as Knative's revision reconciler writes it, the
// Configuration and Route of each Service, a PrestartRun the gate released, and a pod of a
// Revision (user-container and queue-proxy, with the queue-proxy's environment). Sizes matter
// here: the gate's memory is the figure, so nothing is made lighter than the real thing.
import { readFileSync } from 'node:fs';
import type { BulkWriter } from '@knative-prestart/devcluster/bulk.ts';
import yaml from 'js-yaml';
import { knativeRevision } from './_revision.ts';

export const SERVING = 'serving.knative.dev/v1';
export const PRESTART = 'prestart.dev/v1alpha1';

/** Knative's Revision: the webhook-visible shape of _revision.ts, numbered and owned by its Configuration (when given). */
export function revisionOf(
  namespace: string,
  service: string,
  generation: number,
  configurationUID: string | undefined,
  annotations: Record<string, string> = {},
): Record<string, unknown> & { metadata: { name: string; labels: Record<string, string> } } {
  const name = `${service}-${String(generation).padStart(5, '0')}`;
  const rev = knativeRevision(namespace, name, annotations) as ReturnType<typeof revisionOf>;
  rev.metadata.labels['serving.knative.dev/configurationGeneration'] = String(generation);
  if (configurationUID === undefined) return rev;
  rev.metadata.labels['serving.knative.dev/configurationUID'] = configurationUID;
  // Only with an owner that exists: the garbage collector deletes what a missing owner owns.
  (rev.metadata as Record<string, unknown>).ownerReferences = [
    { apiVersion: SERVING, kind: 'Configuration', name: service, uid: configurationUID, controller: true, blockOwnerDeletion: true },
  ];
  return rev;
}

/** The status Knative writes on a Revision: Ready once its pods run, Deploying while held. */
export function revisionStatus(ready: boolean, now: string): Record<string, unknown> {
  const image = 'registry.example.com/shop/checkout@sha256:3f1d2c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3';
  const condition = (type: string, extra: Record<string, unknown> = {}) => ({
    type,
    status: ready ? 'True' : 'Unknown',
    lastTransitionTime: now,
    ...(ready ? {} : { reason: 'Deploying' }),
    ...extra,
  });
  return {
    observedGeneration: 1,
    actualReplicas: ready ? 1 : 0,
    desiredReplicas: 1,
    containerStatuses: [{ name: 'user-container', imageDigest: image }],
    conditions: [
      condition('Active', ready ? { reason: 'NoTraffic', message: 'The target is not receiving traffic.', severity: 'Info' } : {}),
      condition('ContainerHealthy'),
      condition('Ready'),
      condition('ResourcesAvailable'),
    ],
  };
}

export function configurationOf(namespace: string, service: string): Record<string, unknown> {
  return {
    apiVersion: SERVING,
    kind: 'Configuration',
    metadata: {
      name: service,
      namespace,
      labels: { 'serving.knative.dev/service': service, 'serving.knative.dev/serviceUID': '5f2a7b4e-8c1d-4e7a-b2f3-9a6c0d1e2f34' },
    },
    spec: {
      template: {
        metadata: { annotations: { 'autoscaling.knative.dev/min-scale': '1' } },
        spec: {
          containerConcurrency: 0,
          timeoutSeconds: 300,
          containers: [{ image: 'registry.example.com/shop/checkout:v42', ports: [{ containerPort: 8080 }] }],
        },
      },
    },
  };
}

/** A Route sending all traffic to the latest ready Revision, and its status as Knative writes it. */
export function routeOf(namespace: string, service: string, latestReady: string, now: string) {
  const url = `http://${service}.${namespace}.example.com`;
  return {
    object: {
      apiVersion: SERVING,
      kind: 'Route',
      metadata: { name: service, namespace, labels: { 'serving.knative.dev/service': service } },
      spec: { traffic: [{ configurationName: service, latestRevision: true, percent: 100 }] },
    },
    status: {
      observedGeneration: 1,
      url,
      address: { url: `http://${service}.${namespace}.svc.cluster.local` },
      traffic: [{ revisionName: latestReady, latestRevision: true, percent: 100 }],
      conditions: ['AllTrafficAssigned', 'CertificateProvisioned', 'IngressReady', 'Ready'].map((type) => ({
        type,
        status: 'True',
        lastTransitionTime: now,
      })),
    },
  };
}

/** A PrestartRun as the gate writes one, and its status once its hook succeeded and it released. */
export function releasedRunOf(namespace: string, revision: string, revisionUID: string, hook: string, hookUrl: string, at: Date) {
  const t = (ms: number) => new Date(at.getTime() + ms).toISOString();
  return {
    object: {
      apiVersion: 'prestart.dev/v1alpha1',
      kind: 'PrestartRun',
      metadata: {
        name: revision,
        namespace,
        labels: { 'serving.knative.dev/revision': revision },
        ownerReferences: [{ apiVersion: SERVING, kind: 'Revision', name: revision, uid: revisionUID }],
      },
      spec: {
        revisionUID,
        hooks: [
          {
            name: hook,
            order: 0,
            timeoutSeconds: 3600,
            resendIntervalSeconds: 30,
            failurePolicy: 'Fail',
            allowedContributions: ['env', 'volume'],
            delivery: { transport: 'http', url: hookUrl },
            params: { database: 'orders', migrate: true },
          },
        ],
      },
    },
    status: {
      phase: 'Released',
      hooks: [
        {
          name: hook,
          phase: 'Succeeded',
          attempt: 1,
          requestedAt: t(0),
          lastSentAt: t(0),
          answeredAt: t(850),
          deadline: t(3_600_000),
          message: 'schema orders migrated to v42 (3 statements)',
        },
      ],
      conditions: [{ type: 'Ready', status: 'True', reason: 'Released', message: 'all hooks passed', lastTransitionTime: t(900) }],
      releasedAt: t(900),
      summary: '1/1',
    },
  };
}

/** A pod of a Revision's Deployment (what Knative's pods carry: user-container and queue-proxy). */
export function podOf(namespace: string, revision: string, index: number, node: string): Record<string, unknown> {
  const service = revision.replace(/-\d+$/, '');
  const queueEnv = [
    ['SERVING_NAMESPACE', namespace],
    ['SERVING_SERVICE', service],
    ['SERVING_CONFIGURATION', service],
    ['SERVING_REVISION', revision],
    ['QUEUE_SERVING_PORT', '8012'],
    ['CONTAINER_CONCURRENCY', '0'],
    ['REVISION_TIMEOUT_SECONDS', '300'],
    ['SERVING_READINESS_PROBE', '{"tcpSocket":{"port":8080,"host":"127.0.0.1"},"successThreshold":1}'],
    ['ENABLE_PROFILING', 'false'],
    ['METRICS_DOMAIN', 'knative.dev/internal/serving'],
    ['SERVING_REQUEST_METRICS_BACKEND', 'prometheus'],
    ['USER_PORT', '8080'],
  ].map(([name, value]) => ({ name, value }));
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${revision}-deployment-7d9f8b6c5-${index.toString(36).padStart(5, '0')}`,
      namespace,
      labels: {
        app: revision,
        'pod-template-hash': '7d9f8b6c5',
        'serving.knative.dev/configuration': service,
        'serving.knative.dev/revision': revision,
        'serving.knative.dev/service': service,
      },
      annotations: { 'autoscaling.knative.dev/min-scale': '1', 'serving.knative.dev/creator': 'system:serviceaccount:ci:deployer' },
    },
    spec: {
      nodeName: node,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 300,
      containers: [
        {
          name: 'user-container',
          image: 'registry.example.com/shop/checkout@sha256:3f1d2c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3',
          ports: [{ name: 'user-port', containerPort: 8080, protocol: 'TCP' }],
          env: [
            { name: 'PORT', value: '8080' },
            { name: 'K_REVISION', value: revision },
            { name: 'K_CONFIGURATION', value: service },
            { name: 'K_SERVICE', value: service },
          ],
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
        },
        {
          name: 'queue-proxy',
          image:
            'gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:0f4e8b2c1d3a5b7c9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d',
          ports: [
            { name: 'http-queueadm', containerPort: 8022, protocol: 'TCP' },
            { name: 'queue-port', containerPort: 8012, protocol: 'TCP' },
          ],
          env: queueEnv,
          readinessProbe: { httpGet: { path: '/', port: 8012, httpHeaders: [{ name: 'K-Network-Probe', value: 'queue' }] } },
          resources: { requests: { cpu: '25m' } },
        },
      ],
    },
  };
}

/** NODE_OPTIONS of the gate container in config/500-gate.yaml ('' when it sets none): the bench runs the gate as installed. */
export function deploymentNodeOptions(): string {
  return deploymentEnv().NODE_OPTIONS ?? '';
}

/** The environment the gate container gets in config/500-gate.yaml (NODE_OPTIONS, the allocator's settings, ...), values given inline. */
export function deploymentEnv(): Record<string, string> {
  const docs = yaml.loadAll(readFileSync(new URL('../config/500-gate.yaml', import.meta.url), 'utf8')) as {
    kind?: string;
    spec?: { template?: { spec?: { containers?: { name: string; env?: { name: string; value?: string }[] }[] } } };
  }[];
  const gate = docs.find((d) => d?.kind === 'Deployment')?.spec?.template?.spec?.containers?.find((c) => c.name === 'gate');
  return Object.fromEntries((gate?.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
}

/** The REST path of a namespaced custom resource (or of its collection, without a name). */
export const apiPath = (group: string, ns: string, plural: string, name?: string) =>
  `/apis/${group}/namespaces/${ns}/${plural}${name ? `/${name}` : ''}`;

/**
 * A Revision of the past as a cluster holds it: created and made Ready by Knative's controller,
 * with the PrestartRun the gate released it with (a day ago), each written with its status.
 */
export async function writeReleasedRevision(
  writer: BulkWriter,
  ns: string,
  rev: ReturnType<typeof revisionOf>,
  hook: string,
  hookUrl: string,
  now: string,
): Promise<void> {
  const name = rev.metadata.name;
  const created = (await writer.send('POST', `${apiPath(SERVING, ns, 'revisions')}?fieldManager=controller`, rev)) as {
    metadata?: { uid?: string };
  };
  await writer.send('PUT', `${apiPath(SERVING, ns, 'revisions', name)}/status?fieldManager=controller`, {
    ...created,
    status: revisionStatus(true, now),
  });
  const run = releasedRunOf(ns, name, created.metadata?.uid ?? '', hook, hookUrl, new Date(Date.now() - 86_400_000));
  const gate = '?fieldManager=knative-prestart-gate';
  const createdRun = (await writer.send('POST', `${apiPath(PRESTART, ns, 'prestartruns')}${gate}`, run.object)) as object;
  await writer.send('PUT', `${apiPath(PRESTART, ns, 'prestartruns', name)}/status${gate}`, { ...createdRun, status: run.status });
}

/**
 * A Service's Configuration and its Route (with status, traffic on `latestRevision`) as Knative's
 * controllers write them; returns the Configuration's UID, which its Revisions are owned by.
 */
export async function writeService(writer: BulkWriter, ns: string, svc: string, latestRevision: string, now: string): Promise<string> {
  const cfg = (await writer.send(
    'POST',
    `${apiPath(SERVING, ns, 'configurations')}?fieldManager=controller`,
    configurationOf(ns, svc),
  )) as {
    metadata?: { uid?: string };
  };
  const route = routeOf(ns, svc, latestRevision, now);
  const created = (await writer.send('POST', `${apiPath(SERVING, ns, 'routes')}?fieldManager=controller`, route.object)) as object;
  await writer.send('PUT', `${apiPath(SERVING, ns, 'routes', svc)}/status?fieldManager=controller`, { ...created, status: route.status });
  return cfg.metadata?.uid ?? '';
}
