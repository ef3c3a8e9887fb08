// The real node's pod network: a Linux bridge of ours with the gateway address, the CNI
// conflist containerd reads (Debian's containernetworking-plugins: bridge + host-local +
// portmap; containerd adds the loopback plugin itself), and a guard that keeps every packet of
// the pods and of the Service range on this machine:
//   - pods get routes to the pod range (on the bridge) and the Service range (via the gateway)
//     only: no default route, so nothing in a pod can even address the outside;
//   - no masquerading (ipMasq false); the Service range is routed to the bridge on the host;
//   - a mangle POSTROUTING chain drops any packet from the pod range, or to the Service range
//     after kube-proxy's DNAT, that would leave by another interface than the bridge or lo.
// All of it is undone by node-host.ts teardownHost (the bridge and its routes go with
// `ip link del`, the chain by name).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClusterStartError } from './errors.ts';

export interface PodNetwork {
  bridge: string;
  /** e.g. 10.234.0.0/24: pod IPs come from it, the first address is the gateway. */
  podCidr: string;
  gatewayIp: string;
  serviceCidr: string;
  /** The CNI network's name (also the prefix of libcni's cache files). */
  networkName: string;
  /** containerd's cni.conf_dir. */
  confDir: string;
  guardChain: string;
}

/** Not used elsewhere on this host: netns.ts takes 10.203.0.0/16, kwok's fake pods 10.244.0.0/16. */
export const DEFAULT_POD_CIDR = '10.234.0.0/24';
/** The bridge's address in DEFAULT_POD_CIDR: the Node's InternalIP (also a SAN of the apiserver's cert). */
export const DEFAULT_NODE_IP = '10.234.0.1';

function ipToInt(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}

function intToIp(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
}

function parseCidr(cidr: string): { base: number; size: number } {
  const [ip, bits] = cidr.split('/');
  const prefix = Number(bits);
  if (!ip || !Number.isInteger(prefix) || prefix < 0 || prefix > 32) throw new ClusterStartError(`real node: bad CIDR ${cidr}`);
  const size = 2 ** (32 - prefix);
  return { base: Math.floor(ipToInt(ip) / size) * size, size };
}

export function cidrsOverlap(a: string, b: string): boolean {
  const x = parseCidr(a.includes('/') ? a : `${a}/32`);
  const y = parseCidr(b.includes('/') ? b : `${b}/32`);
  return x.base < y.base + y.size && y.base < x.base + x.size;
}

export function planPodNetwork(dir: string, podCidr: string, serviceCidr: string): PodNetwork {
  const { base, size } = parseCidr(podCidr);
  if (size < 16 || size > 65536) throw new ClusterStartError(`real node: pod range ${podCidr} must be a /16 to a /28`);
  return {
    bridge: 'kpbr0',
    podCidr,
    gatewayIp: intToIp(base + 1),
    serviceCidr,
    networkName: 'knative-prestart-node',
    confDir: join(dir, 'cni-conf'),
    guardChain: 'KPNODE-GUARD',
  };
}

function ip(...args: string[]): string {
  try {
    return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new ClusterStartError(`real node: ip ${args.join(' ')}: ${stderr || (err as Error).message}`);
  }
}

function iptables(...args: string[]): void {
  try {
    execFileSync('iptables', ['-w', '5', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new ClusterStartError(`real node: iptables ${args.join(' ')}: ${stderr || (err as Error).message}`);
  }
}

/** Refuses a pod range that any route or address of this host already covers. */
export function checkPodCidrFree(p: PodNetwork): void {
  if (cidrsOverlap(p.podCidr, p.serviceCidr))
    throw new ClusterStartError(`real node: pod range ${p.podCidr} overlaps the Service range ${p.serviceCidr}`);
  for (const line of ip('-4', 'route', 'show', 'table', 'all').split('\n')) {
    const dst = line.split(' ')[0];
    if (!dst || dst === 'default' || !/^\d/.test(dst) || line.includes(' table local')) continue;
    if (dst.startsWith('127.')) continue;
    if (cidrsOverlap(dst, p.podCidr)) {
      throw new ClusterStartError(`real node: pod range ${p.podCidr} is taken on this host (route: ${line.trim()}); pass another podCidr`);
    }
  }
}

export function writeCniConfig(p: PodNetwork, ipamDir: string): string {
  mkdirSync(p.confDir, { recursive: true });
  const conflist = {
    cniVersion: '0.4.0',
    name: p.networkName,
    plugins: [
      {
        type: 'bridge',
        bridge: p.bridge,
        isGateway: true,
        isDefaultGateway: false,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: p.podCidr, gateway: p.gatewayIp }]],
          // The pod range is on-link; the Service range goes through the gateway (kube-proxy).
          routes: [{ dst: p.serviceCidr }],
          dataDir: ipamDir,
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
  const file = join(p.confDir, '10-knative-prestart-node.conflist');
  writeFileSync(file, `${JSON.stringify(conflist, null, 2)}\n`);
  return file;
}

/** The bridge with the gateway address (before the kubelet: it is the node's IP), routes, guard. */
export function setUpBridge(p: PodNetwork): void {
  const prefix = p.podCidr.split('/')[1];
  ip('link', 'add', p.bridge, 'type', 'bridge');
  ip('addr', 'add', `${p.gatewayIp}/${prefix}`, 'dev', p.bridge);
  ip('link', 'set', p.bridge, 'up');
  // Host processes reach ClusterIPs through the bridge (kube-proxy DNATs them to pods), from
  // the gateway address; a ClusterIP with no rule then stays on the bridge too.
  ip('route', 'add', p.serviceCidr, 'dev', p.bridge, 'src', p.gatewayIp);
  const c = p.guardChain;
  iptables('-t', 'mangle', '-N', c);
  iptables('-t', 'mangle', '-A', c, '-o', p.bridge, '-j', 'RETURN');
  iptables('-t', 'mangle', '-A', c, '-o', 'lo', '-j', 'RETURN');
  iptables('-t', 'mangle', '-A', c, '-s', p.podCidr, '-j', 'DROP');
  iptables('-t', 'mangle', '-A', c, '-m', 'conntrack', '--ctorigdst', p.serviceCidr, '-j', 'DROP');
  iptables('-t', 'mangle', '-I', 'POSTROUTING', '1', '-j', c);
}
