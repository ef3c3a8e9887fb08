// Cuts one process's TCP connections to a port, as a network blip or an apiserver restart would:
// the kernel aborts them (ss -K, which needs CAP_NET_ADMIN, as devcluster/netns.ts does) and the
// process sees its requests and watches fail. Benches use it, with etcd compacted
// (devcluster/etcd-compact.ts), to make a running gate re-list everything it watches.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Local ports of `pid`'s established TCP connections to `remotePort` on any address. */
function localPorts(pid: number, remotePort: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // Closed while we looked.
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address rem_address st ... inode (field 9)
      const [local, remote, state, inode] = [f[1], f[2], f[3], f[9]];
      if (!local || !remote || state !== '01' || !inode || !inodes.has(inode)) continue;
      if (Number.parseInt(remote.split(':')[1] ?? '', 16) === remotePort) ports.push(Number.parseInt(local.split(':')[1] ?? '', 16));
    }
  }
  return ports;
}

/** Aborts every TCP connection of `pid` to `remotePort`; returns how many it cut. */
export function cutConnections(pid: number, remotePort: number): number {
  const ports = localPorts(pid, remotePort);
  for (const port of ports) {
    execFileSync('ss', ['-K', 'dport', '=', `:${remotePort}`, 'sport', '=', `:${port}`], { stdio: 'ignore' });
  }
  return ports.length;
}
