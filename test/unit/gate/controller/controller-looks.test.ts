// The controller's Revisions cache holds the held ones only; an unheld Revision is read from the
// apiserver only when something may be left to do for it (gate/controller/controller.ts): an unfinished
// run (decide's finishInterruptedRelease), the gate's finalizer still on it (deleting). Released Revisions with
// finished runs, the great majority at scale, cost no read at all. The caches are client-node's
// real ListWatch, fed through their watch callback; the client counts the live reads.
import type { KubernetesObject, ListWatch } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import type { HookObject, NamespacedHookObject, RevisionObject, RunObject } from '../../../../api/resources.ts';
import { CANCEL_FINALIZER, HOLD_LABEL } from '../../../../api/types.ts';
import type { ApplyDeps } from '../../../../gate/controller/apply.ts';
import { Controller } from '../../../../gate/controller/controller.ts';
import { snapshotHook } from '../../../../gate/core/snapshot.ts';
import { revisionStub, runView } from '../../../../gate/kube/cache-views.ts';
import type { Caches } from '../../../../gate/kube/caches.ts';
import { hookCatalog } from '../../../../gate/kube/hook-catalog.ts';
import { RevisionIndex } from '../../../../gate/kube/revision-index.ts';
import { WrittenRuns } from '../../../../gate/kube/written-runs.ts';
import { systemClock } from '../../../../gate/runtime/clock.ts';
import { createMetrics } from '../../../../gate/telemetry/metrics.ts';
import { fedCache } from '../_fed-cache.ts';
import { hook } from '../core/_builders.ts';

async function cacheOf<T extends KubernetesObject>(items: T[]): Promise<ListWatch<T>> {
  return (await fedCache(items)).cache;
}

const revision = (name: string, extra: Partial<NonNullable<RevisionObject['metadata']>> = {}): RevisionObject => ({
  apiVersion: 'serving.knative.dev/v1',
  kind: 'Revision',
  metadata: {
    name,
    namespace: 'team',
    uid: `uid-${name}`,
    resourceVersion: '1',
    labels: { 'serving.knative.dev/configuration': 'web' },
    ...extra,
  },
});

const run = (name: string, phase: 'Running' | 'Released'): RunObject =>
  runView({
    apiVersion: 'prestart.dev/v1alpha1',
    kind: 'PrestartRun',
    metadata: { name, namespace: 'team', uid: `run-${name}`, resourceVersion: '1' },
    spec: { revisionUID: `uid-${name}`, hooks: [] },
    status: { phase, hooks: [], conditions: [] },
  });

async function setup(opts: { held?: RevisionObject[]; runs?: RunObject[]; stubs?: RevisionObject[] }) {
  const reads: string[] = [];
  const index = new RevisionIndex();
  for (const s of opts.stubs ?? []) index.set(revisionStub(s));
  const runs = await cacheOf(opts.runs ?? []);
  const hooks = await cacheOf<HookObject>([]);
  const namespacedHooks = await cacheOf<NamespacedHookObject>([]);
  const caches = {
    revisions: await cacheOf(opts.held ?? []),
    revisionStubs: await cacheOf<KubernetesObject>([]),
    revisionIndex: index,
    namespaces: await cacheOf<KubernetesObject>([{ metadata: { name: 'team' } }]),
    routes: await cacheOf<KubernetesObject>([]),
    hooks,
    namespacedHooks,
    catalog: hookCatalog({ hooks, namespacedHooks }),
    runs,
    written: new WrittenRuns(runs, runView),
    health: () => [],
    synced: async () => undefined,
    lead: async () => undefined,
    stop: async () => undefined,
  } as unknown as Caches;
  const patches: string[] = [];
  const client = {
    getRevision: async (namespace: string, name: string) => {
      reads.push(`${namespace}/${name}`);
      return undefined;
    },
    mergePatchRevision: async (namespace: string, name: string) => {
      patches.push(`${namespace}/${name}`);
    },
    jsonPatchRevision: async (namespace: string, name: string) => {
      patches.push(`${namespace}/${name}`);
      return '8';
    },
    setRevisionCondition: async () => undefined,
    recordEvent: async () => undefined,
  };
  const apply = { clock: systemClock, client } as unknown as ApplyDeps;
  const controller = new Controller({ caches, apply, log: pino({ level: 'silent' }), metrics: createMetrics(), workers: 1, resyncMs: 0 });
  return { controller, reads, patches };
}

test('a released Revision whose run is finished costs no read', async (t) => {
  const { controller, reads } = await setup({ runs: [run('web-00001', 'Released')], stubs: [revision('web-00001')] });
  t.is(await controller.reconcile('team/web-00001'), undefined);
  t.deepEqual(reads, []);
});

test('an unheld Revision whose run is unfinished is read live (an interrupted release to finish)', async (t) => {
  const { controller, reads } = await setup({ runs: [run('web-00002', 'Running')] });
  await controller.reconcile('team/web-00002');
  t.deepEqual(reads, ['team/web-00002']);
});

test('an unheld Revision that still carries the gate finalizer is read live (its deletion waits on it)', async (t) => {
  const { controller, reads } = await setup({ stubs: [revision('web-00003', { finalizers: [CANCEL_FINALIZER] })] });
  await controller.reconcile('team/web-00003');
  t.deepEqual(reads, ['team/web-00003']);
});

test('a held Revision is decided from the cache, without a read', async (t) => {
  const held = revision('web-00004', { labels: { [HOLD_LABEL]: 'true' }, annotations: { 'prestart.dev/hooks': 'not json' } });
  const { controller, reads, patches } = await setup({ held: [held] });
  // The malformed hooks annotation makes decide() set a hold reason.
  await controller.reconcile('team/web-00004');
  t.deepEqual(reads, []);
  t.deepEqual(patches, ['team/web-00004']);
});

test('a Revision nobody knows of is neither read nor decided', async (t) => {
  const { controller, reads } = await setup({});
  t.is(await controller.reconcile('team/gone-00001'), undefined);
  t.deepEqual(reads, []);
});

test('a Revision this replica released is not released again while the held cache still shows it', async (t) => {
  // The run's own watch event wakes a second reconcile before the watch brings the released
  // Revision: deciding from the stale copy would patch again (a 409 and a backoff).
  const db = snapshotHook(hook('db'));
  const held: RevisionObject = {
    ...revision('web-00005', { labels: { [HOLD_LABEL]: 'true' }, annotations: { 'prestart.dev/hooks': '["db"]' } }),
    spec: { containers: [{ name: 'user-container', image: 'dev.local/web:v5' }] },
    status: { containerStatuses: [{ name: 'user-container' }] },
  };
  const succeeded: RunObject = {
    apiVersion: 'prestart.dev/v1alpha1',
    kind: 'PrestartRun',
    metadata: { name: 'web-00005', namespace: 'team', uid: 'run-web-00005', resourceVersion: '7' },
    spec: { revisionUID: 'uid-web-00005', hooks: [db], containers: [{ name: 'user-container', image: 'dev.local/web:v5' }] },
    status: { phase: 'Running', hooks: [{ name: 'db', phase: 'Succeeded', attempt: 1 }], conditions: [] },
  };
  const { controller, patches } = await setup({ held: [held], runs: [succeeded] });
  await controller.reconcile('team/web-00005');
  t.deepEqual(patches, ['team/web-00005'], 'released once');
  await controller.reconcile('team/web-00005');
  t.deepEqual(patches, ['team/web-00005'], 'the same stale copy is not released again');
});
