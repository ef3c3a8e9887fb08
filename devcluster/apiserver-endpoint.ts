// Pods of the real node reach the apiserver as in any cluster: through Service default/kubernetes
// (ClusterIP 10.0.0.1:443, created by the apiserver itself), whose endpoint is the bridge's
// address. The apiserver listens on 127.0.0.1 only (every kwok-only cluster keeps it so, and the
// shared cluster is started before any node exists: --bind-address takes one address), so while
// a node runs a TCP pass-through of ours listens on <bridge address>:<apiserver port> and pipes
// each connection to 127.0.0.1:<apiserver port>. It does not look into the bytes: TLS is between
// the pod and the apiserver (the serving cert has SANs 10.0.0.1, kubernetes.default.svc and the
// bridge address) and the pod authenticates with its ServiceAccount token. The one thing it
// changes: the apiserver sees every pod's connection as coming from 127.0.0.1 (audit source IPs).
// The EndpointSlice is ours because the endpoint reconciler is off (components.ts says why).
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { DiscoveryV1Api } from '@kubernetes/client-node';

export const APISERVER_SLICE = 'kubernetes-real-node';
const MANAGED_BY = 'knative-prestart-devcluster';

export interface ApiserverForward {
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** Listens on host:port (the bridge address) and pipes every connection to 127.0.0.1:port. */
export async function startApiserverForward(host: string, port: number): Promise<ApiserverForward> {
  const open = new Set<Socket>();
  let count = 0;
  const server: Server = createServer({ noDelay: true }, (inbound) => {
    count++;
    const outbound = createConnection({ host: '127.0.0.1', port, noDelay: true });
    open.add(inbound).add(outbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
      open.delete(inbound);
      open.delete(outbound);
    };
    inbound.on('error', end).on('close', end);
    outbound.on('error', end).on('close', end);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // The owner's event loop must not wait on it.
  server.unref();
  return {
    connections: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The endpoint of Service default/kubernetes: the bridge address and the apiserver's port. */
export async function publishApiserverEndpoint(discovery: DiscoveryV1Api, host: string, port: number, nodeName: string): Promise<void> {
  const namespace = 'default';
  await discovery.deleteNamespacedEndpointSlice({ name: APISERVER_SLICE, namespace }).catch(() => undefined);
  await discovery.createNamespacedEndpointSlice({
    namespace,
    body: {
      metadata: {
        name: APISERVER_SLICE,
        labels: { 'kubernetes.io/service-name': 'kubernetes', 'endpointslice.kubernetes.io/managed-by': MANAGED_BY },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [host], conditions: { ready: true }, nodeName }],
      ports: [{ name: 'https', port, protocol: 'TCP' }],
    },
  });
}
