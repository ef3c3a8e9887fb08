// Whether a real node can run on this host, checked without loading the node's code (the
// quickstart asks before its build, and its first lines must print at once).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** One line saying why no real node can run here (the caller falls back to kwok), or undefined. */
export function realNodeUnavailable(): string | undefined {
  if (process.getuid?.() !== 0)
    return 'real node: needs root (containerd, the kubelet, the bridge and iptables change the host); use kwok nodes';
  const have = (cmd: string) => {
    try {
      execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore', env: pathEnv() });
      return true;
    } catch {
      return false;
    }
  };
  const missing = ['containerd', 'containerd-shim-runc-v2', 'runc', 'ctr', 'iptables', 'ip'].filter((c) => !have(c));
  if (!existsSync('/usr/lib/cni/bridge')) missing.push('/usr/lib/cni/bridge');
  if (missing.length > 0) return `real node: ${missing.join(', ')} not installed (scripts/system-deps.sh installs them); use kwok nodes`;
  return undefined;
}

export function pathEnv(): NodeJS.ProcessEnv {
  const path = process.env.PATH ?? '';
  const extra = ['/usr/local/sbin', '/usr/sbin', '/sbin'].filter((d) => !path.split(':').includes(d));
  return { ...process.env, PATH: [path, ...extra].filter(Boolean).join(':') };
}
