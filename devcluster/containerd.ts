// containerd for the real node: Debian's containerd 1.6 with its CRI plugin and runc, with a
// root, state, socket and runc root of its own (nothing under /var/lib/containerd or
// /etc/containerd), settings checked on this machine (../shared/notes/knative-facts.md):
// restrict_oom_score_adj (the VM lacks CAP_SYS_RESOURCE), the cgroupfs driver, CNI from
// /usr/lib/cni with a conf_dir of ours. Images are imported from OCI archives built here; a
// pull of anything else is sent to a closed port on 127.0.0.1 (registry hosts config).
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ClusterStartError } from './errors.ts';
import type { ComponentSpec } from './processes.ts';

const execFileP = promisify(execFile);

/** The Kubernetes namespace of containerd, where the CRI plugin keeps images and containers. */
export const CRI_NAMESPACE = 'k8s.io';

export interface ContainerdLayout {
  dir: string;
  address: string;
  configFile: string;
}

export function containerdLayout(nodeDir: string): ContainerdLayout {
  const dir = join(nodeDir, 'containerd');
  return { dir, address: join(dir, 'containerd.sock'), configFile: join(dir, 'config.toml') };
}

export function writeContainerdConfig(l: ContainerdLayout, opts: { sandboxImage: string; cniConfDir: string }): void {
  const hosts = join(l.dir, 'certs.d');
  mkdirSync(join(hosts, '_default'), { recursive: true });
  // Any registry: port 9 (discard) of 127.0.0.1, where nothing listens. Nothing is pulled.
  writeFileSync(
    join(hosts, '_default', 'hosts.toml'),
    'server = "http://127.0.0.1:9"\n\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n',
  );
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  const toml = `version = 2
root = "${join(l.dir, 'root')}"
state = "${join(l.dir, 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "${l.address}"

[ttrpc]
  address = "${l.address}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "${join(l.dir, 'opt')}"

[${cri}]
  sandbox_image = "${opts.sandboxImage}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[${cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[${cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[${cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "${join(l.dir, 'runc')}"

[${cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "${opts.cniConfDir}"
  max_conf_num = 1

[${cri}.registry]
  config_path = "${hosts}"
`;
  writeFileSync(l.configFile, toml);
}

export function containerdSpec(l: ContainerdLayout): ComponentSpec {
  return { name: 'containerd', command: 'containerd', args: ['--config', l.configFile, '--log-level', 'warn'] };
}

/** `ctr` against our containerd, in the CRI namespace. */
export async function ctr(l: ContainerdLayout, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileP('ctr', ['--address', l.address, '--namespace', CRI_NAMESPACE, ...args], { timeout: 60_000 });
    return stdout;
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new ClusterStartError(`real node: ctr ${args.join(' ')}: ${stderr || (err as Error).message}`);
  }
}

/** Imports an OCI archive and makes sure it carries `ref` (CRI looks images up by that name). */
export async function importImage(l: ContainerdLayout, archive: string, ref: string): Promise<void> {
  await ctr(l, 'images', 'import', archive);
  const names = (await ctr(l, 'images', 'list', '--quiet')).split('\n');
  if (!names.includes(ref)) {
    throw new ClusterStartError(`real node: importing ${archive} gave ${names.filter(Boolean).join(', ') || 'no image'}, not ${ref}`);
  }
}
