// WrittenRuns: a run this replica wrote is read back from that write until the informer delivers
// it (or something newer), and never stands in for a newer or a deleted copy. The informer here is
// client-node's ListWatch fed by a stand-in watch (_fed-cache.ts): what is tested is the overlay.
import test from 'ava';
import type { RunObject } from '../../../../api/resources.ts';
import { runView } from '../../../../gate/kube/cache-views.ts';
import { TTL_MS, WrittenRuns } from '../../../../gate/kube/written-runs.ts';
import { fedCache } from '../_fed-cache.ts';

const run = (resourceVersion: string, phase: 'Running' | 'Released' = 'Running'): RunObject => ({
  apiVersion: 'prestart.dev/v1alpha1',
  kind: 'PrestartRun',
  metadata: { name: 'web-00001', namespace: 'team', uid: 'run-1', resourceVersion },
  spec: { revisionUID: 'rev-1', hooks: [] },
  status: { phase, hooks: [], conditions: [] },
});

async function setup(listed: RunObject[] = []) {
  const { cache, emit } = await fedCache<RunObject>(listed);
  let now = 0;
  const written = new WrittenRuns(cache, runView, () => now);
  return { written, emit, advance: (ms: number) => (now += ms) };
}

const rv = (r: RunObject | undefined) => r?.metadata?.resourceVersion;

test('a status this replica wrote is read before the watch brings it, then the informer copy is', async (t) => {
  const { written, emit } = await setup([run('10')]);
  written.note(run('12'));
  t.is(rv(written.get('team', 'web-00001')), '12');
  emit('MODIFIED', run('12'));
  t.is(rv(written.get('team', 'web-00001')), '12');
  t.is(written.size, 0, 'the informer caught up: nothing is kept');
});

test('a run created here is known before its ADDED event', async (t) => {
  const { written } = await setup();
  written.note(run('5'));
  t.is(rv(written.get('team', 'web-00001')), '5');
});

test('a newer copy from the informer (another replica wrote after us) wins', async (t) => {
  const { written, emit } = await setup([run('10')]);
  written.note(run('12'));
  emit('MODIFIED', run('15', 'Released'));
  t.is(rv(written.get('team', 'web-00001')), '15');
  t.is(written.size, 0);
});

test('a write older than the cached copy is not kept', async (t) => {
  const { written } = await setup([run('20')]);
  written.note(run('12'));
  t.is(rv(written.get('team', 'web-00001')), '20');
  t.is(written.size, 0);
});

test('a deleted run is not brought back by an earlier write', async (t) => {
  const { written, emit } = await setup([run('10')]);
  written.note(run('12'));
  emit('DELETED', run('13'));
  t.is(written.get('team', 'web-00001'), undefined);
});

test('a write the watch never confirms stops standing in after the TTL', async (t) => {
  const { written, advance } = await setup([run('10')]);
  written.note(run('12'));
  advance(TTL_MS + 1);
  t.is(rv(written.get('team', 'web-00001')), '10');
  t.is(written.size, 0);
});

test('resourceVersions that are not numbers: the informer copy is read', async (t) => {
  const { written } = await setup([run('a')]);
  written.note(run('b'));
  t.is(rv(written.get('team', 'web-00001')), 'a');
});
