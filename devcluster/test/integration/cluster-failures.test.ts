// Each way a cluster start can fail ends in one line that says what happened and what to do,
// and leaves no process behind. These start real etcd/kube-apiserver processes of their own.
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { startCluster } from '../../control-plane.ts';
import { ClusterStartError } from '../../errors.ts';
import { PID_STATE_FILE, type PidState } from '../../leftovers.ts';

function lastLine(err: Error): string {
  return err.message.trimEnd().split('\n').pop() ?? '';
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cluster-failure-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

// Environment variables are process-wide: these tests run one after the other.
test.serial('missing binaries name the build script', async (t) => {
  const saved = process.env.KNATIVE_PRESTART_CACHE;
  process.env.KNATIVE_PRESTART_CACHE = await tempDir(t);
  try {
    const err = await t.throwsAsync(startCluster(), { instanceOf: ClusterStartError });
    t.regex(lastLine(err), /^missing control-plane binaries in .* \(etcd-v.*kube-apiserver.*\): run devcluster\/build-binaries\.sh all/);
  } finally {
    if (saved === undefined) delete process.env.KNATIVE_PRESTART_CACHE;
    else process.env.KNATIVE_PRESTART_CACHE = saved;
  }
});

test.serial('a pinned apiserver port already in use is refused before anything starts', async (t) => {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen({ host: '127.0.0.1', port: 0 }, resolve));
  t.teardown(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  const port = (holder.address() as { port: number }).port;
  process.env.KNATIVE_PRESTART_APISERVER_PORT = String(port);
  try {
    const err = await t.throwsAsync(startCluster(), { instanceOf: ClusterStartError });
    t.is(
      lastLine(err),
      `port ${port} for kube-apiserver (from KNATIVE_PRESTART_APISERVER_PORT) is already in use on 127.0.0.1: stop what holds it (ss -ltnp 'sport = :${port}') or unset KNATIVE_PRESTART_APISERVER_PORT`,
    );
  } finally {
    delete process.env.KNATIVE_PRESTART_APISERVER_PORT;
  }
});

test.serial('a component that exits during start is named, with the end of its log', async (t) => {
  const dir = await tempDir(t);
  // A file where etcd wants its data directory: etcd exits at once.
  await writeFile(join(dir, 'etcd-data'), 'not a directory');
  const err = await t.throwsAsync(startCluster({ dir }), { instanceOf: ClusterStartError });
  t.regex(lastLine(err), /^cluster: etcd exited with code \d+ during start \(full log: .*etcd\.log\)$/);
  t.true(err.message.startsWith('last lines of etcd.log:\n'), err.message);
  const state = JSON.parse(readFileSync(join(dir, PID_STATE_FILE), 'utf8')) as PidState;
  t.deepEqual(
    state.components.filter((c) => alive(c.pid)).map((c) => c.name),
    [],
  );
});

test.serial('an apiserver not ready by the deadline fails with a timeout naming its log', async (t) => {
  const dir = await tempDir(t);
  const err = await t.throwsAsync(startCluster({ dir, timeoutMs: 300 }), { instanceOf: ClusterStartError });
  t.regex(lastLine(err), /^cluster: kube-apiserver not ready within 0\.3s \(.*\); full log: .*kube-apiserver\.log$/);
  t.false(existsSync(join(dir, 'etcd-data')), 'etcd data is removed after a failed start');
  const state = JSON.parse(readFileSync(join(dir, PID_STATE_FILE), 'utf8')) as PidState;
  t.deepEqual(
    state.components.filter((c) => alive(c.pid)).map((c) => c.name),
    [],
  );
});
