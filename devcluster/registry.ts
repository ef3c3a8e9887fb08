// A real OCI registry on 127.0.0.1: Debian's docker-registry (the CNCF distribution registry),
// plain HTTP, its storage in a directory of its own removed on stop. Clients that talk to a
// registry by the distribution API (skopeo, buildah, go-containerregistry in Knative's tag
// resolver) treat a 127.0.0.1 registry as plain HTTP without being told.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from './ports.ts';
import { findExecutable, onPath, startService } from './service.ts';

/** The manifest types a registry is asked for: what a kubelet or Knative's resolver accepts. */
const MANIFEST_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');

export interface Registry {
  /** `127.0.0.1:PORT`: the registry part of an image reference. */
  host: string;
  logFile: string;
  /** The digest `repository:reference` names now (HEAD of its manifest), or undefined while it names none. */
  digestOf(repository: string, reference: string): Promise<string | undefined>;
  stop(): Promise<void>;
}

export async function startRegistry(opts: { timeoutMs?: number } = {}): Promise<Registry> {
  const binary = findExecutable(onPath('docker-registry'), 'no docker-registry on PATH (Debian: apt-get install docker-registry)');
  const dir = mkdtempSync(join(tmpdir(), 'prestart-registry-'));
  const [port] = (await freePorts(1)) as [number];
  const host = `127.0.0.1:${port}`;
  const config = join(dir, 'config.yml');
  writeFileSync(
    config,
    `version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\nhttp:\n  addr: ${host}\n`,
  );
  const { component, stop } = await startService(
    { name: 'docker-registry', command: binary, args: ['serve', config] },
    dir,
    () =>
      fetch(`http://${host}/v2/`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.ok,
        () => false,
      ),
    { what: `docker-registry to serve /v2/ on ${host}`, timeoutMs: opts.timeoutMs ?? 30_000 },
  );
  return {
    host,
    logFile: component.logFile,
    async digestOf(repository, reference) {
      const res = await fetch(`http://${host}/v2/${repository}/manifests/${reference}`, {
        method: 'HEAD',
        headers: { accept: MANIFEST_TYPES },
        signal: AbortSignal.timeout(5000),
      });
      if (res.status === 404) return undefined;
      if (!res.ok) throw new Error(`registry HEAD /v2/${repository}/manifests/${reference}: HTTP ${res.status}`);
      return res.headers.get('docker-content-digest') ?? undefined;
    },
    stop,
  };
}
