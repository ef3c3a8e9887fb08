// The demo namespace's objects as the quickstart's watches see them, at the moments that matter:
// the Revision held, the hook running, the release, the pod with its binding, the Service Ready.

import type { CoreEvent, KnativeObject } from '@knative-prestart/devcluster/knative-client.ts';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { RunObject } from '../../../../api/resources.ts';
import { HOLD_LABEL, type HookStatus } from '../../../../api/types.ts';
import type { DemoTarget } from '../../../../examples/quickstart/milestones.ts';
import type { DemoObjects } from '../../../../examples/quickstart/view.ts';

export const TARGET: DemoTarget = { namespace: 'demo', service: 'demo', revision: 'demo-00001' };

export function empty(): DemoObjects {
  return { services: new Map(), revisions: new Map(), runs: new Map(), deployments: new Map(), pods: new Map(), events: new Map() };
}

/** The objects with writable maps, to fill in a test. */
export type Mutable = { [K in keyof DemoObjects]: Map<string, unknown> };

export function objects(fill: (o: Mutable) => void): DemoObjects {
  const o = empty() as unknown as Mutable;
  fill(o);
  return o as unknown as DemoObjects;
}

export function revision(
  name: string,
  opts: { held: boolean; hooks?: string[]; ready?: [string, string?]; inject?: boolean },
): KnativeObject {
  return {
    metadata: {
      name,
      labels: {
        'serving.knative.dev/service': 'demo',
        ...(opts.held ? { [HOLD_LABEL]: 'true' } : {}),
        ...(opts.inject ? { 'prestart.dev/inject': 'true' } : {}),
      },
      annotations: opts.hooks ? { 'prestart.dev/hooks': JSON.stringify(opts.hooks) } : {},
    },
    status: opts.ready
      ? { conditions: [{ type: 'Ready', status: opts.ready[0], ...(opts.ready[1] ? { reason: opts.ready[1] } : {}) }] }
      : {},
  };
}

export function run(name: string, phase: 'Pending' | 'Running' | 'Released' | 'Failed', hook: Partial<HookStatus>): RunObject {
  return {
    metadata: { name },
    spec: { revisionUID: 'uid-1', hooks: [] },
    status: {
      phase,
      summary: phase === 'Released' ? '1/1' : '0/1',
      conditions: [],
      hooks: [{ name: 'demo-db', phase: 'Requested', attempt: 1, ...hook }],
    },
  };
}

export function deployment(revisionName: string, ready: number): V1Deployment {
  return {
    metadata: { name: `${revisionName}-deployment`, labels: { 'serving.knative.dev/revision': revisionName } },
    spec: { replicas: 1, selector: {}, template: {} },
    status: { readyReplicas: ready },
  };
}

/** A pod as the gate's webhook leaves it: the binding in the app container only, never in queue-proxy. */
export function pod(revisionName: string, opts: { ready: boolean; bound: boolean }): V1Pod {
  const env = opts.bound
    ? [
        { name: 'SERVICE_BINDING_ROOT', value: '/bindings' },
        { name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'demo-db', key: 'uri' } } },
        { name: 'DATABASE_PASSWORD', valueFrom: { secretKeyRef: { name: 'demo-db', key: 'password' } } },
      ]
    : [];
  return {
    metadata: { name: `${revisionName}-deployment-abc-xyz`, labels: { 'serving.knative.dev/revision': revisionName } },
    spec: {
      containers: [
        { name: 'user-container', env, volumeMounts: opts.bound ? [{ name: 'prestart-db', mountPath: '/bindings/db' }] : [] },
        { name: 'queue-proxy', env: [{ name: 'SERVING_PORT', value: '8012' }] },
      ],
      volumes: opts.bound ? [{ name: 'prestart-db', secret: { secretName: 'demo-db' } }] : [],
    },
    status: { phase: opts.ready ? 'Running' : 'Pending', conditions: [{ type: 'Ready', status: opts.ready ? 'True' : 'False' }] },
  };
}

export function service(ready: [string, string?, string?], traffic?: { revisionName: string; percent: number }[]): KnativeObject {
  return {
    metadata: { name: 'demo' },
    status: {
      conditions: [
        { type: 'Ready', status: ready[0], ...(ready[1] ? { reason: ready[1] } : {}), ...(ready[2] ? { message: ready[2] } : {}) },
      ],
      ...(ready[0] === 'True' ? { latestReadyRevisionName: 'demo-00001' } : {}),
      ...(traffic ? { traffic } : {}),
    },
  };
}

export const HOLD_EVENT: CoreEvent = {
  metadata: { name: 'demo-00001.1' },
  involvedObject: { kind: 'Revision', name: 'demo-00001' },
  type: 'Warning',
  reason: 'InternalError',
  count: 4,
  source: { component: 'revision-controller' },
  message:
    'failed to create deployment "demo-00001-deployment": deployments.apps "demo-00001-deployment" is forbidden: ' +
    "ValidatingAdmissionPolicy 'prestart-hold-deployments' with binding 'prestart-hold-deployments' denied request: " +
    'knative-prestart: Revision demo-00001 is held until its pre-start hooks finish; see: kubectl get prestartrun demo-00001 -n demo',
};
