// Leadership comes and goes; the controller's informer handlers must not pile up with it (each
// leaked set would scan the cache again on every event, for the life of the process). The
// caches are client-node's real ListWatch, fed through their watch callback.
import type { KubernetesObject } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import type { RevisionObject, RunObject } from '../../../../api/resources.ts';
import { HOLD_LABEL } from '../../../../api/types.ts';
import type { ApplyDeps } from '../../../../gate/controller/apply.ts';
import { Controller } from '../../../../gate/controller/controller.ts';
import type { Cache, Caches } from '../../../../gate/kube/caches.ts';
import { RevisionIndex } from '../../../../gate/kube/revision-index.ts';
import { WrittenRuns } from '../../../../gate/kube/written-runs.ts';
import { systemClock } from '../../../../gate/runtime/clock.ts';
import { createMetrics } from '../../../../gate/telemetry/metrics.ts';
import { type FedCache, fedCache } from '../_fed-cache.ts';

/** A fed cache whose events get a new resourceVersion each, as every write gives them. */
async function versionedCache<T extends KubernetesObject>(): Promise<FedCache<T>> {
  const fed = await fedCache<T>();
  return {
    cache: fed.cache,
    emit: (phase, obj) => fed.emit(phase, { ...obj, metadata: { ...obj.metadata, resourceVersion: String(Math.random()) } }),
  };
}

async function setup() {
  const revisions = await versionedCache<RevisionObject>();
  const namespaces = await versionedCache<KubernetesObject>();
  const others = await Promise.all([versionedCache(), versionedCache(), versionedCache(), versionedCache()]);
  const caches = {
    revisions: revisions.cache,
    revisionStubs: others[3]?.cache,
    revisionIndex: new RevisionIndex(),
    namespaces: namespaces.cache,
    routes: others[0]?.cache,
    hooks: others[1]?.cache,
    runs: others[2]?.cache,
    written: new WrittenRuns(others[2]?.cache as unknown as Cache<RunObject>, (run) => run),
    health: () => [],
    synced: async () => undefined,
    lead: async () => undefined,
    stop: async () => undefined,
  } as unknown as Caches;
  // Reconciles here end before applying anything (the namespace is not cached): no writer needed.
  const apply = { clock: systemClock } as unknown as ApplyDeps;
  const controller = new Controller({ caches, apply, log: pino({ level: 'silent' }), metrics: createMetrics(), workers: 2, resyncMs: 0 });
  // A namespace add scans the held Revisions of that namespace once: count the scans.
  const scans: string[] = [];
  const list = revisions.cache.list.bind(revisions.cache);
  revisions.cache.list = (namespace?: string) => {
    if (namespace) scans.push(namespace);
    return list(namespace);
  };
  return { revisions, namespaces, controller, scans };
}

const revision = (name: string, held = false): RevisionObject => ({
  apiVersion: 'serving.knative.dev/v1',
  kind: 'Revision',
  metadata: {
    name,
    namespace: 'team',
    labels: { 'serving.knative.dev/configuration': 'web', ...(held ? { [HOLD_LABEL]: 'true' } : {}) },
  },
});

const namespace = (name: string): KubernetesObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });

test('after many leadership flaps an event is handled once, as in the first term', async (t) => {
  const { namespaces, controller, scans } = await setup();
  controller.startTerm();
  namespaces.emit('ADDED', namespace('team'));
  t.deepEqual(scans, ['team'], 'first term: one scan per event');

  for (let flap = 0; flap < 20; flap++) {
    await controller.stop();
    controller.startTerm();
  }
  scans.length = 0;
  namespaces.emit('ADDED', namespace('team-b'));
  t.deepEqual(scans, ['team-b'], 'after 20 flaps: still one scan per event, not 21');
  await controller.stop();
});

test('between terms (not leading) events cost nothing', async (t) => {
  const { revisions, namespaces, controller, scans } = await setup();
  controller.startTerm();
  await controller.stop();
  revisions.emit('ADDED', revision('web-00003', true));
  namespaces.emit('ADDED', namespace('team'));
  t.deepEqual(scans, []);
});

test('a held Revision added is not a scan of its namespace', async (t) => {
  const { revisions, controller, scans } = await setup();
  controller.startTerm();
  revisions.emit('ADDED', revision('web-00004', true));
  t.deepEqual(scans, []);
  await controller.stop();
});

test('a namespace the cache learns of wakes the Revisions held in it', async (t) => {
  const { namespaces, controller, scans } = await setup();
  controller.startTerm();
  namespaces.emit('ADDED', namespace('team'));
  t.deepEqual(scans, ['team']);
  await controller.stop();
});
