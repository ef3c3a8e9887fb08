import { execFile } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { type ControlPlaneBinaries, controlPlaneBinaries } from './binaries.ts';
import { createCertificateAuthority, createSigningKeyPair, issueCertificate, readPem } from './certs.ts';
import { DEFAULT_NODE_IP } from './cni.ts';
import {
  apiserverSpec,
  type ControlPlaneLayout,
  controllerManagerSpec,
  etcdSpec,
  kwokNode,
  kwokSpec,
  schedulerSpec,
} from './components.ts';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { clustersRoot, processStartTime, reapLeftovers, writePidState } from './leftovers.ts';
import { freePorts, pinnedPort } from './ports.ts';
import { httpsGet } from './probe.ts';
import { type Component, type ComponentSpec, describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { mintUserKubeconfig } from './users.ts';
import { WaitTimeoutError, waitFor } from './wait.ts';

/** A running local control plane: real etcd, kube-apiserver, controller-manager, scheduler, kwok nodes. */
export interface Cluster {
  /** Admin (system:masters) access. */
  kubeConfig: KubeConfig;
  kubeconfigPath: string;
  /** Holds pki/, the kubeconfigs, one <component>.log per process, and cluster.json. */
  dir: string;
  apiserverUrl: string;
  /** Version each binary reports, by component name. */
  versions: Record<string, string>;
  caCertPem: string;
  /** A kubeconfig for any user and groups, authenticated by a client cert from the cluster CA. */
  mintUserKubeconfig(user: string, groups?: string[]): Promise<string>;
  /** Stops every process; removes the directory unless keepDir (or KNATIVE_PRESTART_KEEP_CLUSTER=1). */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
}

export interface StartClusterOptions {
  /** Directory for the cluster (created); default: a new one under the OS temp dir. */
  dir?: string;
  /** Fake kwok nodes to create; default 1. 0: kwok does not run (nor need to be built). */
  nodes?: number;
  /** Deadline for the whole start; default 90 s (KNATIVE_PRESTART_START_TIMEOUT_MS overrides). */
  timeoutMs?: number;
  /** Receives progress lines (leftovers reaped, phases); default: silent. */
  progress?: (line: string) => void;
}

/** What another process (a test worker) needs to use a running cluster; written to cluster.json. */
export interface ClusterInfo {
  apiserverUrl: string;
  kubeconfigPath: string;
  versions: Record<string, string>;
  caCertFile: string;
  caKeyFile: string;
}

export const CLUSTER_INFO_FILE = 'cluster.json';

const execFileP = promisify(execFile);

async function reportedVersion(bin: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileP(bin, args, { timeout: 10_000 });
    const m = /v?\d+\.\d+\.\d+\S*/.exec(stdout);
    return m ? m[0] : (stdout.trim().split('\n')[0] ?? 'unknown');
  } catch (err) {
    return `unknown (${(err as Error).message.split('\n')[0]})`;
  }
}

async function binaryVersions(b: ControlPlaneBinaries, kwok: boolean): Promise<Record<string, string>> {
  const entries: [string, string, string[]][] = [
    ['etcd', b.etcd, ['--version']],
    ['kube-apiserver', b.kubeApiserver, ['--version']],
    ['kube-controller-manager', b.kubeControllerManager, ['--version']],
    ['kube-scheduler', b.kubeScheduler, ['--version']],
    ...(kwok ? [['kwok', b.kwok, ['--version']] as [string, string, string[]]] : []),
  ];
  const versions = await Promise.all(entries.map(([, bin, args]) => reportedVersion(bin, args)));
  return Object.fromEntries(entries.map(([name], i) => [name, versions[i] as string]));
}

function envTimeout(): number | undefined {
  const raw = process.env.KNATIVE_PRESTART_START_TIMEOUT_MS;
  return raw ? Number(raw) : undefined;
}

function keepByEnv(): boolean {
  return process.env.KNATIVE_PRESTART_KEEP_CLUSTER === '1';
}

export async function startCluster(opts: StartClusterOptions = {}): Promise<Cluster> {
  const started = performance.now();
  const progress = opts.progress ?? (() => {});
  const timeoutMs = opts.timeoutMs ?? envTimeout() ?? 90_000;
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(deadline - Date.now(), 1);
  // No kwok node, no kwok: a cluster whose only node is the real one (devcluster/node.ts).
  const withKwok = (opts.nodes ?? 1) > 0;
  const binaries = controlPlaneBinaries({ kwok: withKwok });
  for (const line of reapLeftovers()) progress(line);
  const versionsP = binaryVersions(binaries, withKwok);

  const apiserverPinned = await pinnedPort('KNATIVE_PRESTART_APISERVER_PORT', 'kube-apiserver');
  const etcdPinned = await pinnedPort('KNATIVE_PRESTART_ETCD_PORT', 'etcd');
  const [freeA, freeB, freeC] = (await freePorts(3)) as [number, number, number];
  const apiserverPort = apiserverPinned ?? freeA;
  const etcdPort = etcdPinned ?? freeB;
  const etcdPeerPort = freeC;
  const apiserverUrl = `https://127.0.0.1:${apiserverPort}`;

  let dir = opts.dir;
  if (dir) await mkdir(dir, { recursive: true });
  else {
    await mkdir(clustersRoot(), { recursive: true });
    dir = await mkdtemp(join(clustersRoot(), 'cluster-'));
  }
  const clusterDir = dir;
  const pki = join(clusterDir, 'pki');

  const ca = await createCertificateAuthority(pki, 'ca', 'knative-prestart-test-ca');
  const [serving, admin, kcm, scheduler, kwok, sa, kubeletClient] = await Promise.all([
    issueCertificate(ca, pki, 'kube-apiserver', {
      commonName: 'kube-apiserver',
      // 10.0.0.1: the ClusterIP of Service default/kubernetes; the real node's bridge address,
      // where pods reach the apiserver (node.ts), for a client that dials the endpoint itself.
      server: {
        ips: ['127.0.0.1', '10.0.0.1', DEFAULT_NODE_IP],
        dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'],
      },
    }),
    issueCertificate(ca, pki, 'admin', { commonName: 'admin', organizations: ['system:masters'], client: true }),
    // The controller-manager and scheduler act as the identities their bootstrap RBAC roles name.
    issueCertificate(ca, pki, 'kube-controller-manager', { commonName: 'system:kube-controller-manager', client: true }),
    issueCertificate(ca, pki, 'kube-scheduler', { commonName: 'system:kube-scheduler', client: true }),
    issueCertificate(ca, pki, 'kwok', { commonName: 'kwok', organizations: ['system:masters'], client: true }),
    createSigningKeyPair(pki, 'service-account'),
    // As kubeadm made it until v1.29: a kubelet authorizes system:masters for its whole API.
    issueCertificate(ca, pki, 'apiserver-kubelet-client', {
      commonName: 'kube-apiserver-kubelet-client',
      organizations: ['system:masters'],
      client: true,
    }),
  ]);
  const caCertPem = await readFile(ca.certFile, 'utf8');
  const kubeconfigs = {
    admin: join(clusterDir, 'admin.kubeconfig'),
    controllerManager: join(clusterDir, 'kube-controller-manager.kubeconfig'),
    scheduler: join(clusterDir, 'kube-scheduler.kubeconfig'),
    kwok: join(clusterDir, 'kwok.kubeconfig'),
  };
  const write = async (path: string, files: { certFile: string; keyFile: string }, user: string) => {
    const { certPem, keyPem } = await readPem(files);
    await writeKubeconfig(path, { server: apiserverUrl, caCertPem, clientCertPem: certPem, clientKeyPem: keyPem, user });
  };
  await Promise.all([
    write(kubeconfigs.admin, admin, 'admin'),
    write(kubeconfigs.controllerManager, kcm, 'system:kube-controller-manager'),
    write(kubeconfigs.scheduler, scheduler, 'system:kube-scheduler'),
    write(kubeconfigs.kwok, kwok, 'kwok'),
  ]);

  const layout: ControlPlaneLayout = {
    dir: clusterDir,
    binaries,
    ports: { apiserver: apiserverPort, etcd: etcdPort, etcdPeer: etcdPeerPort },
    ca,
    apiserverServing: serving,
    kubeletClient,
    serviceAccountKey: sa,
    kubeconfigs,
  };

  const components: Component[] = [];
  let stopping = false;
  const ownerStartTime = processStartTime(process.pid);
  const recordPids = (stoppedAt?: string) =>
    writePidState(clusterDir, {
      ownerPid: process.pid,
      ownerStartTime,
      components: components.map((c) => ({ name: c.name, pid: c.pid, command: c.command })),
      ...(stoppedAt ? { stoppedAt } : {}),
    });
  /** Keeps the logs and pki of a stopped cluster for a look; etcd's data is of no use. */
  const keepStoppedDir = () => {
    if (!existsSync(clusterDir)) return;
    rmSync(join(clusterDir, 'etcd-data'), { recursive: true, force: true });
    recordPids(new Date().toISOString());
  };
  const unregisterExitHook = onExit((reason) => {
    stopping = true;
    for (const c of components) signalGroup(c.pid, 'SIGKILL');
    // On a signal, a listener of its own (test/run.ts) may still call stop() and keep the logs.
    if (reason === 'exit' && !keepByEnv()) rmSync(clusterDir, { recursive: true, force: true });
  });
  const launch = (spec: ComponentSpec) => {
    const c = startComponent(spec, clusterDir);
    components.push(c);
    recordPids();
    void c.exited.then((info) => {
      if (!stopping && cluster) {
        process.stderr.write(
          `cluster: ${c.name} ${describeExit(info)} while the cluster was running; last lines of ${c.logFile}:\n${logTail(c.logFile, 10)}\n`,
        );
      }
    });
    return c;
  };
  const earlyExit = (): Error | undefined => {
    const dead = components.find((c) => c.exitInfo !== undefined);
    if (!dead?.exitInfo) return undefined;
    return new ClusterStartError(
      `cluster: ${dead.name} ${describeExit(dead.exitInfo)} during start (full log: ${dead.logFile})`,
      `last lines of ${dead.name}.log:\n${logTail(dead.logFile)}`,
    );
  };
  let cluster: Cluster | undefined;

  const abortStart = async (err: unknown): Promise<never> => {
    stopping = true;
    await stopComponents(components, 3000);
    unregisterExitHook();
    keepStoppedDir();
    throw err;
  };

  try {
    launch(etcdSpec(layout));
    // The apiserver retries etcd until it answers: start both at once.
    launch(apiserverSpec(layout));
    const tls = { ca: caCertPem, ...(await readPem(admin).then((p) => ({ cert: p.certPem, key: p.keyPem }))) };
    await waitFor(
      async () => {
        const res = await httpsGet(`${apiserverUrl}/readyz`, tls);
        if (res.status === 200) return true;
        throw new Error(
          `/readyz answered ${res.status}: ${res.body
            .split('\n')
            .filter((l) => l.includes('[-]'))
            .join(' ')}`,
        );
      },
      { what: 'kube-apiserver /readyz', timeoutMs: left(), intervalMs: 100, bail: earlyExit },
    ).catch((err: unknown) => {
      if (err instanceof WaitTimeoutError) {
        const log = join(clusterDir, 'kube-apiserver.log');
        throw new ClusterStartError(
          `cluster: kube-apiserver not ready within ${(timeoutMs / 1000).toFixed(1)}s (${err.message.replace(/^.*?; /, '')}); full log: ${log}`,
          `last lines of kube-apiserver.log:\n${logTail(log)}`,
        );
      }
      throw err;
    });
    progress(`kube-apiserver ready at ${apiserverUrl} after ${((performance.now() - started) / 1000).toFixed(1)}s`);

    launch(controllerManagerSpec(layout));
    launch(await schedulerSpec(layout));
    if (withKwok) launch(kwokSpec(layout));

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigs.admin);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const nodeNames = Array.from({ length: opts.nodes ?? 1 }, (_, i) => `kwok-node-${i}`);
    await Promise.all(nodeNames.map((name) => core.createNode({ body: kwokNode(name) })));
    await Promise.all([
      ...nodeNames.map((name) =>
        waitFor(
          async () => {
            const node = await core.readNode({ name });
            const ready = node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
            const tainted = (node.spec?.taints ?? []).some((t) => t.key.startsWith('node.kubernetes.io/'));
            return ready && !tainted;
          },
          { what: `node ${name} Ready and untainted (kwok + node-lifecycle-controller)`, timeoutMs: left(), bail: earlyExit },
        ),
      ),
      waitFor(() => core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' }), {
        what: 'ServiceAccount default/default (kube-controller-manager)',
        timeoutMs: left(),
        bail: earlyExit,
      }),
    ]).catch((err: unknown) => {
      if (err instanceof WaitTimeoutError) throw new ClusterStartError(`cluster: ${err.message} (logs in ${clusterDir})`);
      throw err;
    });

    const versions = await versionsP;
    const info: ClusterInfo = { apiserverUrl, kubeconfigPath: kubeconfigs.admin, versions, caCertFile: ca.certFile, caKeyFile: ca.keyFile };
    await writeFile(join(clusterDir, CLUSTER_INFO_FILE), `${JSON.stringify(info, null, 2)}\n`);
    progress(`cluster ready after ${((performance.now() - started) / 1000).toFixed(1)}s (dir ${clusterDir})`);

    let stopped: Promise<void> | undefined;
    cluster = {
      kubeConfig,
      kubeconfigPath: kubeconfigs.admin,
      dir: clusterDir,
      apiserverUrl,
      versions,
      caCertPem,
      mintUserKubeconfig: (user, groups = []) => mintUserKubeconfig({ dir: clusterDir, apiserverUrl, ca }, user, groups),
      stop: (stopOpts = {}) => {
        stopped ??= (async () => {
          stopping = true;
          await stopComponents(components, 5000);
          unregisterExitHook();
          if (stopOpts.keepDir || keepByEnv()) keepStoppedDir();
          else rmSync(clusterDir, { recursive: true, force: true });
        })();
        return stopped;
      },
    };
    return cluster;
  } catch (err) {
    return abortStart(err);
  }
}
