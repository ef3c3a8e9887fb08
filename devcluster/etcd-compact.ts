// Compacts the local control plane's etcd at its current revision, as the apiserver's own
// compactor does every five minutes: a watch that comes back with an older resourceVersion (after
// the apiserver ended it) then gets 410 Gone and its client lists everything again. Benches use it
// to make every informer re-list now, not whenever the next compaction happens to fall.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PID_STATE_FILE, type PidState } from './leftovers.ts';

/** The etcd client URL of the cluster in `clusterDir` (from its process's command line). */
function etcdUrl(clusterDir: string): string {
  const state = JSON.parse(readFileSync(join(clusterDir, PID_STATE_FILE), 'utf8')) as PidState;
  const etcd = state.components.find((c) => c.name === 'etcd');
  if (!etcd) throw new Error(`no etcd in ${clusterDir}/${PID_STATE_FILE}`);
  const flag = readFileSync(`/proc/${etcd.pid}/cmdline`, 'utf8')
    .split('\0')
    .find((a) => a.startsWith('--listen-client-urls='));
  const url = flag?.slice(flag.indexOf('=') + 1).split(',')[0];
  if (!url) throw new Error(`etcd (pid ${etcd.pid}) has no --listen-client-urls`);
  return url;
}

/** Compacts etcd at its current revision (through its JSON gateway); returns that revision. */
export async function compactEtcd(clusterDir: string): Promise<number> {
  const url = etcdUrl(clusterDir);
  const post = async (path: string, body: object) => {
    const res = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as { header?: { revision?: string } };
  };
  const head = await post('/v3/kv/range', { key: Buffer.from('/').toString('base64') });
  const revision = Number(head.header?.revision);
  await post('/v3/kv/compaction', { revision: String(revision), physical: true });
  return revision;
}
