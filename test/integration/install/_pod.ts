// Runs a container of a release Deployment from the built image the way a kubelet runs a pod's
// container, under buildah's chroot isolation (image/buildah.sh): the image's entrypoint with the
// container's args, as the pod's runAsUser, with the container's env, KUBERNETES_SERVICE_HOST/PORT
// and the ServiceAccount's token, ca.crt and namespace mounted at
// /var/run/secrets/kubernetes.io/serviceaccount. chroot isolation shares the host's network: the
// container reaches the local apiserver on 127.0.0.1 and listens on the ports the test gives it.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CoreV1Api, type KubeConfig, type V1Deployment } from '@kubernetes/client-node';
import { onExit } from '../../../devcluster/exit-hooks.ts';
import { type Component, logTail, signalGroup, startComponent, stopComponents } from '../../../devcluster/processes.ts';
import { waitFor } from '../../../devcluster/wait.ts';
import type { LocalImage } from '../../../release/build.ts';

const run = promisify(execFile);
const buildah = fileURLToPath(new URL('../../../image/buildah.sh', import.meta.url));
export const SERVICE_ACCOUNT_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface Pod {
  /** The digest of the image the container was made from. */
  imageDigest: string;
  /** The command line the container runs (entrypoint and args). */
  command: string[];
  log(): string;
  /** Waits until GET http://127.0.0.1:<port><path> answers 2xx; fails early if the container exits. */
  waitReady(port: number, path: string): Promise<void>;
  stop(): Promise<void>;
}

export interface PodOptions {
  admin: KubeConfig;
  /** The apiserver as the pod sees it (KUBERNETES_SERVICE_HOST/PORT). */
  apiserver: URL;
  caCertPem: string;
  image: LocalImage;
  deployment: V1Deployment;
  /** Appended to the container's args: the addresses a pod has to itself that a shared network lacks. */
  extraArgs: string[];
}

/** A token for the ServiceAccount minted with the TokenRequest API, as the kubelet's projected volume holds it. */
async function serviceAccountVolume(admin: KubeConfig, namespace: string, name: string, caCertPem: string, dir: string): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  const tr = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  await mkdir(dir, { mode: 0o755 });
  await writeFile(join(dir, 'token'), tr.status?.token ?? '', { mode: 0o644 });
  await writeFile(join(dir, 'ca.crt'), caCertPem, { mode: 0o644 });
  await writeFile(join(dir, 'namespace'), namespace, { mode: 0o644 });
}

/** Runs `command` once in a fresh container of the image, as `user`; returns what it printed. */
export async function runOnce(image: LocalImage, user: string, command: string[]): Promise<string> {
  const name = `once-${process.pid}-${Date.now().toString(36)}`;
  await run(buildah, ['from', '--quiet', '--name', name, `oci-archive:${image.archive}`]);
  try {
    return (await run(buildah, ['run', '--isolation', 'chroot', '--user', user, name, '--', ...command])).stdout;
  } finally {
    await run(buildah, ['rm', name]);
  }
}

export async function runPod(opts: PodOptions): Promise<Pod> {
  const { deployment } = opts;
  const namespace = deployment.metadata?.namespace ?? 'default';
  const podSpec = deployment.spec?.template.spec;
  const container = podSpec?.containers[0];
  if (!podSpec || !container) throw new Error(`Deployment ${deployment.metadata?.name} has no container`);
  const name = `${deployment.metadata?.name}-${process.pid}-${Date.now().toString(36)}`;
  // The pod's directory on this machine: its ServiceAccount volume and its log.
  const dir = await mkdtemp(join(tmpdir(), `pod-${name}-`));
  const saDir = join(dir, 'serviceaccount');
  await serviceAccountVolume(opts.admin, namespace, podSpec.serviceAccountName ?? 'default', opts.caCertPem, saDir);
  await run(buildah, ['from', '--quiet', '--name', name, `oci-archive:${opts.image.archive}`]);
  const cleanup = async () => {
    await run(buildah, ['rm', name]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const inspected = JSON.parse((await run(buildah, ['inspect', '--type', 'container', name])).stdout) as {
      FromImageDigest: string;
      OCIv1: { config?: { Entrypoint?: string[] } };
    };
    const command = [...(container.command ?? inspected.OCIv1.config?.Entrypoint ?? []), ...(container.args ?? []), ...opts.extraArgs];
    const user = String(container.securityContext?.runAsUser ?? podSpec.securityContext?.runAsUser ?? '');
    const env = [
      ...(container.env ?? []).map((e) => `${e.name}=${e.value ?? ''}`),
      `KUBERNETES_SERVICE_HOST=${opts.apiserver.hostname}`,
      `KUBERNETES_SERVICE_PORT=${opts.apiserver.port}`,
      `HOSTNAME=${name}`,
    ];
    const component: Component = startComponent(
      {
        name,
        command: buildah,
        args: [
          'run',
          '--isolation',
          'chroot',
          ...(user ? ['--user', user] : []),
          '--volume',
          `${saDir}:${SERVICE_ACCOUNT_MOUNT}:ro`,
          ...env.flatMap((e) => ['--env', e]),
          name,
          '--',
          ...command,
        ],
      },
      dir,
    );
    // buildah's chroot child outlives a SIGKILLed buildah: the group is killed when this process exits.
    const unregister = onExit(() => signalGroup(component.pid, 'SIGKILL'));
    const exited = () =>
      component.exitInfo
        ? new Error(`${name} exited (${JSON.stringify(component.exitInfo)}):\n${logTail(component.logFile, 40)}`)
        : undefined;
    return {
      imageDigest: inspected.FromImageDigest,
      command,
      log: () => logTail(component.logFile, 40),
      async waitReady(port, path) {
        const ok = () =>
          fetch(`http://127.0.0.1:${port}${path}`).then(
            (r) => r.ok,
            () => false,
          );
        await waitFor(ok, { timeoutMs: 60_000, what: `${name} to answer ${path} on port ${port}`, bail: exited });
      },
      async stop() {
        await stopComponents([component], 10_000);
        unregister();
        await cleanup();
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
