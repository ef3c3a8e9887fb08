// A three-node JetStream cluster for tests: three nats-server processes on 127.0.0.1, each with
// its own client port, route port and store, routed to one another under one cluster name. A node
// can be killed with SIGKILL (no shutdown, no leadership hand-off: a lost machine) and started
// again on the same ports and store, as a pod restarted on its volume would be.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { natsInfo, natsServerBinary } from './nats.ts';
import { freePorts } from './ports.ts';
import { type Component, describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { waitFor } from './wait.ts';

export interface NatsClusterNode {
  /** The server_name, which JetStream names in a stream's cluster.leader and replicas. */
  name: string;
  url: string;
  port: number;
  logFile: string;
  running(): boolean;
}

export interface NatsCluster {
  nodes: NatsClusterNode[];
  /** Every node's URL, comma-separated: what --nats and NATS_URL take. */
  servers: string;
  /** The server_name of the stream's current leader (JetStream's STREAM.INFO cluster.leader), undefined while there is none. */
  streamLeader(stream: string): Promise<string | undefined>;
  /** The stream's cluster view: leader and each replica's current/lag, as STREAM.INFO gives it. */
  streamCluster(stream: string): Promise<StreamClusterView | undefined>;
  /** SIGKILL to the node's process; resolves once it is gone. */
  kill(name: string): Promise<void>;
  /** Starts the killed node again on its ports and store; resolves once it greets with JetStream on. */
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

export interface StreamClusterView {
  leader?: string;
  replicas: { name: string; current: boolean; lag?: number }[];
}

interface Node extends NatsClusterNode {
  configFile: string;
  component?: Component;
}

const CLUSTER_NAME = 'prestart-test';

export async function startNatsCluster(opts: { size?: number; timeoutMs?: number } = {}): Promise<NatsCluster> {
  const size = opts.size ?? 3;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const binary = natsServerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-cluster-'));
  const ports = await freePorts(size * 2);
  const clientPorts = ports.slice(0, size) as number[];
  const routePorts = ports.slice(size) as number[];
  const nodes: Node[] = clientPorts.map((port, i) => {
    const name = `n${i + 1}-${port}`;
    const nodeDir = join(dir, name);
    mkdirSync(nodeDir);
    const configFile = join(nodeDir, 'nats-server.conf');
    writeFileSync(
      configFile,
      [
        `listen: "127.0.0.1:${port}"`,
        `server_name: "${name}"`,
        `jetstream { store_dir: ${JSON.stringify(join(nodeDir, 'jetstream'))} }`,
        // Every node lists every route, itself included (nats-server skips its own): one config shape for all.
        `cluster { name: "${CLUSTER_NAME}", listen: "127.0.0.1:${routePorts[i]}", routes: [${routePorts.map((p) => `"nats-route://127.0.0.1:${p}"`).join(', ')}] }`,
      ].join('\n'),
    );
    const node: Node = {
      name,
      url: `nats://127.0.0.1:${port}`,
      port,
      configFile,
      logFile: join(nodeDir, 'nats-server.log'),
      running: () => node.component !== undefined && node.component.exitInfo === undefined,
    };
    return node;
  });
  const unregister = onExit(() => {
    for (const n of nodes) if (n.component) signalGroup(n.component.pid, 'SIGKILL');
  });

  async function launch(node: Node): Promise<void> {
    const nodeDir = join(dir, node.name);
    const component = startComponent({ name: 'nats-server', command: binary, args: ['-c', node.configFile] }, nodeDir);
    node.component = component;
    await waitFor(() => natsInfo(node.port), {
      what: `nats-server ${node.name} to greet`,
      timeoutMs,
      intervalMs: 50,
      bail: () =>
        component.exitInfo
          ? new ClusterStartError(`nats-server ${node.name} ${describeExit(component.exitInfo)}`, logTail(component.logFile))
          : undefined,
    });
  }

  // One connection for the API questions, to every node: it follows the cluster through a kill.
  let admin: NatsConnection | undefined;
  const servers = nodes.map((n) => n.url).join(',');
  const stop = async () => {
    await admin?.close().catch(() => undefined);
    await stopComponents(
      nodes.flatMap((n) => (n.component ? [n.component] : [])),
      5_000,
    );
    unregister();
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await Promise.all(nodes.map(launch));
    admin = await connect({
      servers: nodes.map((n) => n.url),
      name: 'nats-cluster-admin',
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    const conn = admin;
    // Greeting is per node; JetStream answers only once the nodes elected a meta leader.
    await waitFor(async () => (await (await conn.jetstreamManager({ checkAPI: false })).getAccountInfo()) !== undefined, {
      what: `the ${size}-node JetStream cluster to elect a meta leader`,
      timeoutMs,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  const conn = admin;

  async function streamCluster(stream: string): Promise<StreamClusterView | undefined> {
    const jsm = await conn.jetstreamManager({ checkAPI: false });
    const info = await jsm.streams.info(stream).catch(() => undefined);
    const c = info?.cluster;
    if (!c) return undefined;
    return {
      ...(c.leader ? { leader: c.leader } : {}),
      replicas: (c.replicas ?? []).map((r) => ({ name: r.name, current: r.current, ...(r.lag === undefined ? {} : { lag: r.lag }) })),
    };
  }

  const byName = (name: string): Node => {
    const node = nodes.find((n) => n.name === name);
    if (!node) throw new Error(`no node ${name} in the cluster (${nodes.map((n) => n.name).join(', ')})`);
    return node;
  };

  return {
    nodes,
    servers,
    streamCluster,
    async streamLeader(stream) {
      return (await streamCluster(stream))?.leader;
    },
    async kill(name) {
      const c = byName(name).component;
      if (!c || c.exitInfo) return;
      c.ref();
      signalGroup(c.pid, 'SIGKILL');
      await c.exited;
    },
    async restart(name) {
      const node = byName(name);
      if (node.running()) throw new Error(`node ${name} is still running`);
      await launch(node);
    },
    stop,
  };
}
