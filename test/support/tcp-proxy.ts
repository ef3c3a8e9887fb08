// A TCP proxy in front of the apiserver that can freeze: it stops forwarding on every connection,
// old and new, without closing any, which is what a half-open connection or a partitioned
// network looks like to a client (no error, no answer). thaw() delivers what was held.
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** The target URL with its port replaced by the proxy's (e.g. https://127.0.0.1:40123). */
  url: string;
  freeze(): void;
  thaw(): void;
  /** Client connections open now (each has its upstream twin). */
  openConnections(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const targetPort = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  let frozen = false;
  const held: Array<() => void> = [];
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  const deliver = (step: () => void) => {
    if (frozen) held.push(step);
    else step();
  };
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  const forward = (from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => deliver(() => to.write(chunk)));
    from.on('end', () => deliver(() => to.end()));
    from.on('error', () => to.destroy());
    from.on('close', () => deliver(() => to.destroy()));
  };
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, target.hostname);
    clients.add(client);
    client.on('close', () => clients.delete(client));
    track(client);
    track(upstream);
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('tcp proxy: no port');
  const url = new URL(targetUrl);
  url.port = String(address.port);
  return {
    url: url.href.replace(/\/$/, ''),
    freeze: () => {
      frozen = true;
    },
    thaw: () => {
      frozen = false;
      for (const step of held.splice(0)) step();
    },
    openConnections: () => clients.size,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
