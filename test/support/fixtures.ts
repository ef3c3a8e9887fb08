// One Revision, one hook and one deadline: the inputs the schema tests build from, and the
// defaults of the test requests (events.ts).
import { HOLD_LABEL, type HookSnapshot, type RevisionView } from '../../api/types.ts';

export const revision: RevisionView = {
  namespace: 'shop',
  name: 'checkout-00002',
  uid: '5b7c3a1e-9f0d-4c2b-8e61-0a4d2f3b7c9e',
  service: 'checkout',
  configuration: 'checkout',
  labels: { 'serving.knative.dev/service': 'checkout', [HOLD_LABEL]: 'true' },
  annotations: { 'prestart.dev/hooks': '["db-migrate"]' },
  images: ['registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae'],
  createdAt: new Date('2025-06-01T11:59:00Z'),
  deleting: false,
  finalizers: ['prestart.dev/cancel-hooks'],
};

/** metadata.uid of the Revision's PrestartRun. */
export const runUID = '9d4e2b71-6c3a-4f8e-b5d0-7a1c3e9f2b64';

export const hook: HookSnapshot = {
  name: 'db-migrate',
  order: 0,
  timeoutSeconds: 600,
  resendIntervalSeconds: 60,
  failurePolicy: 'Fail',
  allowedContributions: ['env', 'volume'],
  delivery: { transport: 'http', url: 'http://db-migrate.shop.svc.cluster.local' },
  params: { database: 'orders' },
};

export const deadline = '2025-06-01T12:10:00.000Z';
