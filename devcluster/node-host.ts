// What a real node (node.ts) changes on this host, written down before it changes it, and the
// one synchronous teardown that undoes all of it: used by stop(), by the exit hook of a test
// killed by a signal, and by the next start when the owner died by SIGKILL (the state file then
// still names everything). One real node per host at a time: the state file is also the lock
// (kubelet and kube-proxy own host-wide things: /kubepods cgroups, KUBE-* iptables chains,
// /var/lib/kubelet/device-plugins).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterStartError } from './errors.ts';
import { processStartTime } from './leftovers.ts';
import { signalGroup } from './processes.ts';

/** Everything of the real node lives under here: state.json (the lock) and node-<pid>/ dirs. */
export function nodeRoot(): string {
  return join(tmpdir(), 'knative-prestart-node');
}
const stateFile = () => join(nodeRoot(), 'state.json');

/**
 * Sysctls the kubelet, kube-proxy or the CNI bridge plugin may write (the kubelet's
 * setupKernelTunables; the bridge plugin turns on forwarding for its gateway; kube-proxy's
 * route_localnet and conntrack settings, which our config asks it to leave alone). Saved before
 * start, written back on teardown when they differ.
 */
export const WATCHED_SYSCTLS = [
  'vm.overcommit_memory',
  'vm.panic_on_oom',
  'kernel.panic',
  'kernel.panic_on_oops',
  'kernel.keys.root_maxkeys',
  'kernel.keys.root_maxbytes',
  'net.ipv4.ip_forward',
  'net.ipv4.conf.all.route_localnet',
  'net.netfilter.nf_conntrack_max',
  'net.bridge.bridge-nf-call-iptables',
  'net.bridge.bridge-nf-call-ip6tables',
];

/** Host paths the node's parts write to that exist only when something made them. */
export const HOST_PATHS = [
  '/var/lib/kubelet', // device-plugins/ is hard-coded in the kubelet
  '/var/log/containers', // the kubelet's symlinks to container logs, hard-coded
  '/var/lib/cni', // libcni's result cache, hard-coded in containerd 1.6's go-cni
  '/run/containerd', // shim sockets (s/), hard-coded in containerd 1.6
  '/run/netns', // containerd's pod network namespaces (cni-<uuid>)
];

export interface NodeHostState {
  ownerPid: number;
  ownerStartTime: string;
  /** ms since epoch, a little before anything was made: pod netns made after it are ours. */
  startedAt: number;
  dir: string;
  bridge: string;
  /** iptables chain of ours (mangle FORWARD) that keeps pod traffic on the bridge. */
  guardChain: string;
  containerdAddress: string;
  kubeProxyBinary: string;
  cniNetwork: string;
  /** Sysctl values before start. */
  sysctls: Record<string, string>;
  /** Those of HOST_PATHS that did not exist before start: removed on teardown. */
  createdPaths: string[];
  /** Process group leaders started for the node (kubelet, containerd, kube-proxy, coredns). */
  pids: number[];
}

export function sysctlPath(name: string): string {
  return join('/proc/sys', ...name.split('.'));
}

export function readSysctl(name: string): string | undefined {
  try {
    return readFileSync(sysctlPath(name), 'utf8').trim();
  } catch {
    return undefined;
  }
}

function ownerAlive(s: Pick<NodeHostState, 'ownerPid' | 'ownerStartTime'>): boolean {
  return s.ownerStartTime !== '' && processStartTime(s.ownerPid) === s.ownerStartTime && alive(s.ownerPid);
}

function readState(): NodeHostState | undefined {
  try {
    return JSON.parse(readFileSync(stateFile(), 'utf8')) as NodeHostState;
  } catch {
    return undefined;
  }
}

/** Tears down what a node of a dead owner left; returns one line per node reaped. */
export function reapNodeLeftovers(): string[] {
  const s = readState();
  if (!s || ownerAlive(s)) return [];
  const notes = teardownHost(s);
  return [`reaped the real node of dead process ${s.ownerPid} (${s.dir})${notes.length ? `: ${notes.join('; ')}` : ''}`];
}

/** Takes the host for one node: writes the state (the lock) before anything is changed. */
export function claimHost(fields: Omit<NodeHostState, 'ownerPid' | 'ownerStartTime' | 'sysctls' | 'createdPaths' | 'pids'>): NodeHostState {
  mkdirSync(nodeRoot(), { recursive: true });
  const state: NodeHostState = {
    ...fields,
    ownerPid: process.pid,
    ownerStartTime: processStartTime(process.pid),
    sysctls: Object.fromEntries(WATCHED_SYSCTLS.flatMap((n) => (readSysctl(n) === undefined ? [] : [[n, readSysctl(n) as string]]))),
    createdPaths: HOST_PATHS.filter((p) => !existsSync(p)),
    pids: [],
  };
  try {
    writeFileSync(stateFile(), JSON.stringify(state, null, 2), { flag: 'wx' });
  } catch {
    const other = readState();
    throw new ClusterStartError(
      `real node: another real node runs on this host (owner pid ${other?.ownerPid}, ${other?.dir}): one at a time (kubelet and kube-proxy own host-wide state)`,
    );
  }
  return state;
}

export function saveState(state: NodeHostState): void {
  writeFileSync(`${stateFile()}.tmp`, JSON.stringify(state, null, 2));
  execFileSync('mv', [`${stateFile()}.tmp`, stateFile()]);
}

function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
}

function tryRun(cmd: string, args: string[]): string | undefined {
  try {
    return run(cmd, args);
  } catch {
    return undefined;
  }
}

/** Synchronous pause for the exit path, where no event loop turns: polls below use it. */
function pauseMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Running (a zombie, dead but not yet waited for by its parent, is not). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function cmdline(pid: string): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** containerd-shim-runc-v2 processes of our containerd (their -address is our socket). */
function shimsOf(address: string): { pid: number; namespace: string; id: string }[] {
  const out: { pid: number; namespace: string; id: string }[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    const args = cmdline(pid);
    if (!args[0]?.endsWith('containerd-shim-runc-v2')) continue;
    const flag = (f: string) => args[args.indexOf(f) + 1] ?? '';
    if (flag('-address') !== address) continue;
    out.push({ pid: Number(pid), namespace: flag('-namespace'), id: flag('-id') });
  }
  return out;
}

/** Every cgroup v1/v2 directory named kubepods at a hierarchy's top. */
function kubepodsCgroups(): string[] {
  const base = '/sys/fs/cgroup';
  const dirs: string[] = [];
  let entries: string[] = [];
  try {
    entries = readdirSync(base);
  } catch {
    return dirs;
  }
  if (existsSync(join(base, 'kubepods'))) dirs.push(join(base, 'kubepods'));
  for (const e of entries) if (existsSync(join(base, e, 'kubepods'))) dirs.push(join(base, e, 'kubepods'));
  return dirs;
}

/** Pids in a cgroup tree. */
function cgroupProcs(dir: string): number[] {
  const pids: number[] = [];
  const walk = (d: string) => {
    try {
      for (const line of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (line) pids.push(Number(line));
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
    } catch {
      // Gone meanwhile.
    }
  };
  walk(dir);
  return pids;
}

function rmdirTree(dir: string): void {
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) rmdirTree(join(dir, e.name));
    rmdirSync(dir);
  } catch {
    // Busy or gone: reported by the check after teardown.
  }
}

/** Mount points at or under `prefix`, deepest first. */
function mountsUnder(prefix: string): string[] {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined && (p === prefix || p.startsWith(`${prefix}/`)))
    .map((p) => p.replace(/\\040/g, ' '));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

function unmountAllUnder(prefix: string): void {
  for (let round = 0; round < 5; round++) {
    const points = mountsUnder(prefix);
    if (points.length === 0) return;
    for (const p of points) tryRun('umount', ['-l', p]);
  }
}

/** iptables chains named <prefix>* in every table, with every rule that jumps to them. */
export function iptablesChains(bin: 'iptables' | 'ip6tables', prefixes: string[]): string[] {
  const found: string[] = [];
  for (const table of ['filter', 'nat', 'mangle', 'raw']) {
    const rules = tryRun(bin, ['-w', '5', '-t', table, '-S']) ?? '';
    for (const line of rules.split('\n')) {
      const m = /^-N (\S+)/.exec(line);
      if (m?.[1] && prefixes.some((p) => m[1]?.startsWith(p))) found.push(`${table}/${m[1]}`);
    }
  }
  return found;
}

/** Splits an `iptables -S` rule into arguments: spaces separate them except inside "quotes". */
export function splitQuoted(rule: string): string[] {
  const args: string[] = [];
  for (const m of rule.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) args.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? ''));
  return args;
}

/** Deletes jumps to chains named <prefix>* from every chain, then flushes and deletes them. */
export function removeIptablesChains(bin: 'iptables' | 'ip6tables', prefixes: string[]): void {
  const ours = (name: string) => prefixes.some((p) => name.startsWith(p));
  for (const table of ['filter', 'nat', 'mangle', 'raw']) {
    const rules = tryRun(bin, ['-w', '5', '-t', table, '-S']);
    if (rules === undefined) continue;
    const chains: string[] = [];
    for (const line of rules.split('\n')) {
      const n = /^-N (\S+)/.exec(line);
      if (n?.[1] && ours(n[1])) chains.push(n[1]);
      const a = /^-A (\S+) (.*-j (\S+).*)$/.exec(line);
      if (a?.[1] && a[2] && a[3] && !ours(a[1]) && ours(a[3])) {
        // iptables -S prints a rule in the form -D takes back, "quoted" where it has spaces.
        tryRun(bin, ['-w', '5', '-t', table, '-D', a[1], ...splitQuoted(a[2])]);
      }
    }
    for (const c of chains) tryRun(bin, ['-w', '5', '-t', table, '-F', c]);
    for (const c of chains) tryRun(bin, ['-w', '5', '-t', table, '-X', c]);
  }
}

/** The network namespaces containerd made for our pods (cni-<uuid>, made after our start). */
function ourPodNetns(startedAt: number): string[] {
  let names: string[] = [];
  try {
    names = readdirSync('/run/netns').filter((n) => n.startsWith('cni-'));
  } catch {
    return [];
  }
  return names.filter((n) => {
    try {
      return statSync(join('/run/netns', n)).mtimeMs >= startedAt;
    } catch {
      return false;
    }
  });
}

function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Not empty (someone else's) or gone.
  }
}

/**
 * Undoes everything the node changed on the host, in the order that lets each step succeed:
 * processes (ours, the shims, every process in the pods' cgroups), mounts, pod network
 * namespaces, cgroups, iptables, the bridge, sysctls, files; then releases the lock.
 * Synchronous (runs in exit hooks); returns notes on what it could not undo.
 */
export function teardownHost(s: NodeHostState): string[] {
  const notes: string[] = [];
  for (const pid of s.pids) signalGroup(pid, 'SIGKILL');
  // Shims reparent to init and so outlive containerd and the pdeathsig; then the pods' processes.
  const shimSockets: string[] = [];
  for (let round = 0; round < 100; round++) {
    const shims = shimsOf(s.containerdAddress);
    const inPods = kubepodsCgroups().flatMap(cgroupProcs);
    const ours = s.pids.filter(alive);
    if (shims.length === 0 && inPods.length === 0 && ours.length === 0) break;
    for (const sh of shims) {
      // containerd 1.6 (runtime/v2/shim/util.go SocketAddress): /run/containerd/s/sha256(address/ns/id).
      const hash = execFileSync('sha256sum', { input: join(s.containerdAddress, sh.namespace, sh.id), encoding: 'utf8' }).split(' ')[0];
      shimSockets.push(join('/run/containerd/s', hash ?? ''));
    }
    for (const pid of [...shims.map((x) => x.pid), ...inPods, ...ours]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone.
      }
    }
    if (round === 99) notes.push(`processes still alive: ${[...shims.map((x) => x.pid), ...inPods, ...ours].join(' ')}`);
    pauseMs(50);
  }
  for (const sock of shimSockets) rmSync(sock, { force: true });

  unmountAllUnder(s.dir);
  unmountAllUnder('/var/lib/kubelet');
  for (const ns of ourPodNetns(s.startedAt)) {
    tryRun('umount', ['-l', join('/run/netns', ns)]);
    rmSync(join('/run/netns', ns), { force: true });
  }

  for (const dir of kubepodsCgroups()) rmdirTree(dir);

  // kube-proxy removes its own rules (--cleanup), then a sweep for any KUBE-* left (the
  // kubelet's, or rules of a kube-proxy mode that did not run) and our guard chain.
  if (existsSync(s.kubeProxyBinary)) tryRun(s.kubeProxyBinary, ['--cleanup', '--v=0']);
  for (const bin of ['iptables', 'ip6tables'] as const) removeIptablesChains(bin, ['KUBE-', s.guardChain]);

  tryRun('ip', ['link', 'del', s.bridge]);

  for (const [name, value] of Object.entries(s.sysctls)) {
    if (readSysctl(name) === value) continue;
    try {
      writeFileSync(sysctlPath(name), value);
    } catch (err) {
      notes.push(`sysctl ${name} not restored to ${value}: ${(err as Error).message}`);
    }
  }

  // Files: the CNI result cache of our network, then whatever of the host paths we created.
  try {
    for (const f of readdirSync('/var/lib/cni/results'))
      if (f.startsWith(`${s.cniNetwork}-`)) rmSync(join('/var/lib/cni/results', f), { force: true });
  } catch {
    // No cache.
  }
  for (const p of s.createdPaths) {
    if (p === '/run/netns') removeIfEmpty(p);
    else rmSync(p, { recursive: true, force: true });
  }
  if (!s.createdPaths.includes('/var/lib/kubelet')) {
    for (const f of ['kubelet.sock', 'kubelet_internal_checkpoint']) rmSync(join('/var/lib/kubelet/device-plugins', f), { force: true });
  }
  rmSync(s.dir, { recursive: true, force: true });
  const current = readState();
  if (current && current.ownerPid === s.ownerPid && current.ownerStartTime === s.ownerStartTime) rmSync(stateFile(), { force: true });
  removeIfEmpty(nodeRoot());
  return notes;
}

/** What is left on the host of a node, for tests and the reaper: empty when it is clean. */
export function hostLeftovers(s: Pick<NodeHostState, 'bridge' | 'guardChain' | 'dir' | 'sysctls'>): string[] {
  const left: string[] = [];
  // Ours, and only ours: every part of the node gets a path in the node dir on its command line
  // (containerd and the kubelet their config, the shims containerd's socket, ...).
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    const args = cmdline(pid);
    if (args.some((a) => a.includes(s.dir))) left.push(`process ${args[0]?.split('/').pop()}[${pid}]`);
  }
  if (existsSync(`/sys/class/net/${s.bridge}`)) left.push(`bridge ${s.bridge}`);
  for (const bin of ['iptables', 'ip6tables'] as const)
    for (const c of iptablesChains(bin, ['KUBE-', s.guardChain])) left.push(`${bin} chain ${c}`);
  for (const [name, value] of Object.entries(s.sysctls))
    if (readSysctl(name) !== value) left.push(`sysctl ${name}=${readSysctl(name)} (was ${value})`);
  if (kubepodsCgroups().length > 0) left.push(`cgroups ${kubepodsCgroups().join(' ')}`);
  if (existsSync(s.dir)) left.push(`dir ${s.dir}`);
  if (mountsUnder(s.dir).length > 0) left.push(`mounts under ${s.dir}`);
  if (existsSync('/var/lib/kubelet/device-plugins/kubelet.sock')) left.push('/var/lib/kubelet/device-plugins/kubelet.sock');
  return left;
}
