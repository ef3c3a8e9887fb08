// A Revision shaped like the ones Knative's configuration controller creates (labels, annotations,
// owner reference, defaulted spec), so the webhook parses and patches what it would in a cluster.
import { randomUUID } from 'node:crypto';

export function knativeRevision(namespace: string, name: string, annotations: Record<string, string> = {}): object {
  const service = name.replace(/-\d+$/, '');
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Revision',
    metadata: {
      name,
      namespace,
      labels: {
        'serving.knative.dev/configuration': service,
        'serving.knative.dev/configurationGeneration': '1',
        'serving.knative.dev/configurationUID': 'f0a3c1f6-6a0e-4a43-9d8e-3b1f0c6d7e21',
        'serving.knative.dev/routingState': 'pending',
        'serving.knative.dev/service': service,
        'serving.knative.dev/serviceUID': '5f2a7b4e-8c1d-4e7a-b2f3-9a6c0d1e2f34',
        'app.kubernetes.io/name': service,
      },
      annotations: {
        'autoscaling.knative.dev/min-scale': '1',
        'autoscaling.knative.dev/target': '100',
        'serving.knative.dev/creator': 'system:serviceaccount:ci:deployer',
        'serving.knative.dev/routes': service,
        'serving.knative.dev/routingStateModified': '2025-01-01T00:00:00Z',
        ...annotations,
      },
    },
    spec: {
      containerConcurrency: 0,
      enableServiceLinks: false,
      timeoutSeconds: 300,
      responseStartTimeoutSeconds: 300,
      containers: [
        {
          name: 'user-container',
          image: 'registry.example.com/shop/checkout@sha256:3f1d2c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3',
          ports: [{ containerPort: 8080, protocol: 'TCP' }],
          env: [
            { name: 'LOG_LEVEL', value: 'info' },
            { name: 'FEATURE_FLAGS', value: 'checkout-v2,fast-cart' },
            { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://otel-collector.observability:4317' },
          ],
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
          readinessProbe: { successThreshold: 1, tcpSocket: { port: 0 } },
        },
      ],
    },
  };
}

/** The AdmissionReview the apiserver sends for a CREATE of `revision` (serialised, ready to POST). */
export function admissionReview(revision: object, namespace: string): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: 'serving.knative.dev', version: 'v1', kind: 'Revision' },
      resource: { group: 'serving.knative.dev', version: 'v1', resource: 'revisions' },
      requestKind: { group: 'serving.knative.dev', version: 'v1', kind: 'Revision' },
      requestResource: { group: 'serving.knative.dev', version: 'v1', resource: 'revisions' },
      name: (revision as { metadata: { name: string } }).metadata.name,
      namespace,
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:knative-serving:controller',
        uid: '0b7f1e2d-3c4a-4b5c-8d6e-7f8091a2b3c4',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:knative-serving', 'system:authenticated'],
      },
      object: revision,
      oldObject: null,
      dryRun: false,
      options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1', fieldManager: 'controller' },
    },
  });
}
