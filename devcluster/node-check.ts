// Whether a real node can run on this host, checked without loading the node's code (the
// quickstart asks before its build, and its first lines must print at once).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** One line saying why no real node can run here (the caller falls back to kwok), or undefined. */
export function realNodeUnavailable(): string | undefined {
  if (process.getuid?.() !== 0)
    return 'real node: needs root (containerd, the kubelet, the bridge and iptables change the host); use kwok nodes';
  const missing = missingNodeParts();
  if (missing.length > 0) return `real node: ${missing.join(', ')} not installed (scripts/system-deps.sh installs them); use kwok nodes`;
  return undefined;
}

/**
 * What scripts/system-deps.sh would install for a real node on this host: the node's own commands
 * and buildah, which builds the node's images on a first run. Empty when nothing is missing.
 */
export function missingNodePackages(): string[] {
  return [...missingNodeParts(), ...(have('buildah') ? [] : ['buildah'])];
}

/** Whether this host installs Debian packages the way scripts/system-deps.sh does. */
export function aptAvailable(): boolean {
  return have('apt-get');
}

function missingNodeParts(): string[] {
  const missing = ['containerd', 'containerd-shim-runc-v2', 'runc', 'ctr', 'iptables', 'ip'].filter((c) => !have(c));
  if (!existsSync('/usr/lib/cni/bridge')) missing.push('/usr/lib/cni/bridge');
  return missing;
}

function have(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore', env: pathEnv() });
    return true;
  } catch {
    return false;
  }
}

export function pathEnv(): NodeJS.ProcessEnv {
  const path = process.env.PATH ?? '';
  const extra = ['/usr/local/sbin', '/usr/sbin', '/sbin'].filter((d) => !path.split(':').includes(d));
  return { ...process.env, PATH: [path, ...extra].filter(Boolean).join(':') };
}
