// A leader whose apiserver connection hangs stops acting within its renew deadline, before any
// other replica may take the lease (M7). Before, no apiserver call had a timeout: a renewal
// that never answered kept the leader "leading" while its lease expired and another replica
// took over, and both controllers sent and wrote at once. Replica A reaches the apiserver
// through a TCP proxy that the test freezes (no error, no answer: a half-open connection);
// replica B reaches it directly.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import type { GateConfig } from '../../../gate/config.ts';
import { type RunningGate, startGate } from '../../../gate/gate.ts';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy.ts';

const LEASE_SECONDS = 3;
/** 2/3 of the lease: the leader's renew deadline. */
const RENEW_DEADLINE_MS = (LEASE_SECONDS * 1000 * 2) / 3;

let env: GateEnv;
let proxy: TcpProxy;
const gates: RunningGate[] = [];

test.before(async () => {
  env = await gateEnv('hung', { inProcess: false });
  proxy = await startTcpProxy(env.cluster.apiserverUrl);
});

test.after.always(async () => {
  proxy?.thaw();
  await Promise.all(gates.map((g) => g.stop()));
  await proxy?.close();
  await env?.stop();
});

function replica(identity: string, kubeConfig: KubeConfig): GateConfig {
  return {
    kubeConfig,
    namespace: 'knative-prestart',
    instance: env.instance,
    identity,
    namespaceSelector: `prestart.dev/gate=${env.instance}`,
    webhook: { host: '127.0.0.1', port: 0, bindingRoot: '/bindings' },
    sink: { host: '127.0.0.1', port: 0, maxBytes: 64 * 1024 },
    source: `/apis/prestart.dev/v1alpha1/gate/${env.instance}`,
    workers: 2,
    leaseSeconds: LEASE_SECONDS,
  };
}

/** The gate's identity, dialling the apiserver through `server`. */
function identityVia(server: string): KubeConfig {
  const direct = new KubeConfig();
  direct.loadFromFile(env.gateKubeconfigPath);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: direct.clusters.map((c) => ({ ...c, server })),
    contexts: direct.contexts,
    users: direct.users,
    currentContext: direct.currentContext,
  });
  return kc;
}

test.serial(
  'a leader whose apiserver connection hangs steps down within its renew deadline, before the other replica takes over',
  async (t) => {
    const log = (name: string) => pino({ name, level: process.env.GATE_LOG_LEVEL ?? 'warn' });
    const a = await startGate(replica(`${env.instance}-a`, identityVia(proxy.url)), log('replica-a'));
    gates.push(a);
    await waitFor(() => a.isLeader(), { what: 'replica A to lead' });
    const direct = new KubeConfig();
    direct.loadFromFile(env.gateKubeconfigPath);
    const b = await startGate(replica(`${env.instance}-b`, direct), log('replica-b'));
    gates.push(b);
    t.true(a.isLeader() && a.controller.active, 'A leads and acts');
    t.false(b.isLeader());

    proxy.freeze();
    const frozenAt = Date.now();
    await waitFor(() => !a.isLeader(), { what: 'replica A to step down', timeoutMs: 10_000, intervalMs: 10 });
    const steppedDownBy = Date.now();
    t.false(a.controller.active, 'A stopped acting');
    t.true(
      steppedDownBy - frozenAt <= RENEW_DEADLINE_MS + 1_000,
      `A stepped down ${steppedDownBy - frozenAt} ms after its connection hung (renew deadline ${RENEW_DEADLINE_MS} ms)`,
    );

    await waitFor(() => b.isLeader(), { what: 'replica B to take the lease', timeoutMs: 20_000 });
    const lease = await env.admin
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: `knative-prestart-gate-${env.instance}`, namespace: 'knative-prestart' });
    t.is(lease.spec?.holderIdentity, `${env.instance}-b`);
    const takenOverAt = new Date(lease.spec?.acquireTime ?? 0).getTime();
    t.true(
      steppedDownBy <= takenOverAt,
      `A had stopped acting (by ${new Date(steppedDownBy).toISOString()}) before B took the lease (${new Date(takenOverAt).toISOString()})`,
    );

    // The connection comes back: A finds the lease taken and stays a follower.
    proxy.thaw();
    await waitFor(() => a.informers().every((i) => i.failingSince === undefined), { what: "A's watches to recover", timeoutMs: 30_000 });
    t.false(a.isLeader());
    t.true(b.isLeader() && b.controller.active);
  },
);
