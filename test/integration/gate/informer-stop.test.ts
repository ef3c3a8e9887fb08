// An informer stopped while its LIST or its WATCH request is still in flight opens no watch after
// the stop. client-node's ListWatch aborts only the request it already holds: before the fix, a
// gate stopping during a relist (a replica stepping down, a pod ending) opened a fresh watch
// afterwards, which held a connection, and the process, for up to the watch's 5 to 10 minutes.
// The informer dials the apiserver through a TCP proxy that counts its open connections.

import { sharedCluster } from '@knative-prestart/devcluster/shared.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, KubeConfig, type V1Namespace } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import { trackedInformer } from '../../../gate/kube/informer.ts';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy.ts';

let admin: KubeConfig;
let proxy: TcpProxy;
let viaProxy: KubeConfig;
const log = pino({ level: 'silent' });

test.before(async () => {
  const cluster = await sharedCluster();
  admin = cluster.kubeConfig;
  proxy = await startTcpProxy(cluster.apiserverUrl);
  viaProxy = new KubeConfig();
  viaProxy.loadFromOptions({
    clusters: admin.clusters.map((c) => ({ ...c, server: proxy.url })),
    contexts: admin.contexts,
    users: admin.users,
    currentContext: admin.currentContext,
  });
});

test.after.always(async () => {
  proxy?.thaw();
  await proxy?.close();
});

test.serial('stopped while listing: no watch is opened once the list returns', async (t) => {
  let releaseList: () => void = () => undefined;
  const listReleased = new Promise<void>((resolve) => {
    releaseList = resolve;
  });
  let listing: () => void = () => undefined;
  const listStarted = new Promise<void>((resolve) => {
    listing = resolve;
  });
  const core = admin.makeApiClient(CoreV1Api);
  const informer = trackedInformer<V1Namespace>(
    viaProxy,
    '/api/v1/namespaces',
    async () => {
      listing();
      await listReleased;
      return core.listNamespace();
    },
    'namespaces',
    log,
  );
  const started = informer.cache.start();
  await listStarted;
  await informer.cache.stop();
  releaseList();
  await started;
  await informer.listed;
  t.is(proxy.openConnections(), 0, 'no watch connection after the stop');
});

test.serial('stopped while the watch request is in flight: the watch is closed as soon as it opens', async (t) => {
  const core = admin.makeApiClient(CoreV1Api);
  const informer = trackedInformer<V1Namespace>(viaProxy, '/api/v1/namespaces', () => core.listNamespace(), 'namespaces', log);
  proxy.freeze();
  const started = informer.cache.start();
  await waitFor(() => proxy.openConnections() > 0, { what: 'the watch request to reach the proxy' });
  await informer.cache.stop();
  proxy.thaw();
  await started;
  await waitFor(() => proxy.openConnections() === 0, { what: 'the watch connection to close', timeoutMs: 10_000 });
  t.pass();
});

test.serial('control: a running informer keeps its watch open (the proxy sees it)', async (t) => {
  const core = admin.makeApiClient(CoreV1Api);
  const informer = trackedInformer<V1Namespace>(viaProxy, '/api/v1/namespaces', () => core.listNamespace(), 'namespaces', log);
  await informer.cache.start();
  t.is(proxy.openConnections(), 1);
  await informer.cache.stop();
  await waitFor(() => proxy.openConnections() === 0, { what: 'the watch connection to close' });
});
