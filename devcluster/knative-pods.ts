// What installing a Knative component from its own release manifests on the real node takes,
// shared by knative-serving-pods.ts and knative-eventing-pods.ts: the images build-binaries.sh made
// ko-style (an OCI archive and its reference per `cmd/<path>`), the module's config/ YAML with its
// `ko://` references resolved as `ko resolve` would, ConfigMap data merged in by name, and the wait
// for the component's Deployments to be available.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppsV1Api, type KubeConfig } from '@kubernetes/client-node';
import { parseManifests } from './apply.ts';
import { BUILD_SCRIPT } from './binaries.ts';
import { ClusterStartError } from './errors.ts';
import type { RealNode } from './node.ts';
import { WaitTimeoutError, waitFor } from './wait.ts';

/** One image build-binaries.sh made: `name` is its `cmd/` path under the module (e.g. broker/filter). */
export interface KoImage {
  name: string;
  archive: string;
  ref: string;
}

/**
 * The images of `names` in `<dir>/images` (`<name with / as ->.oci.tar` and `.ref`), and the
 * config/ paths that must exist; refused with the build command to run when any is missing.
 */
export function koBuildOutput(dir: string, names: readonly string[], needed: string[], target: string): KoImage[] {
  const images = names.map((name) => {
    const file = name.replaceAll('/', '-');
    const refFile = join(dir, 'images', `${file}.ref`);
    return {
      name,
      archive: join(dir, 'images', `${file}.oci.tar`),
      ref: existsSync(refFile) ? readFileSync(refFile, 'utf8').trim() : '',
    };
  });
  const missing = [
    ...images.filter((i) => !existsSync(i.archive) || !i.ref).map((i) => i.archive),
    ...needed.filter((p) => !existsSync(p)),
  ];
  if (missing.length > 0)
    throw new ClusterStartError(`${target} pods: missing ${missing.join(', ')}: run ${BUILD_SCRIPT} ${target}-images`);
  return images;
}

/**
 * What `ko resolve` does to a manifest: each `ko://<module>/cmd/<path>` becomes the image built
 * from it. A reference to an image not built is refused, unless `unbuilt` names it: then it is
 * resolved to `unbuilt[path]`, an image the node does not have (for env values naming images of
 * features not run, e.g. Eventing's ApiServerSource adapter: a pod of one would not start).
 */
export function koResolve(text: string, module: string, images: Record<string, string>, unbuilt: Record<string, string> = {}): string {
  const escaped = module.replaceAll('.', '\\.').replaceAll('/', '\\/');
  return text.replace(new RegExp(`ko:\\/\\/${escaped}\\/cmd\\/([a-z0-9_/-]+)`, 'g'), (ref, path: string) => {
    const image = images[path] ?? unbuilt[path];
    if (!image) throw new ClusterStartError(`${module} pods: no image built for ${ref}`);
    return image;
  });
}

function yamlFiles(path: string): string[] {
  if (!path.endsWith('.yaml')) {
    return readdirSync(path)
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => join(path, f));
  }
  return [path];
}

/** The manifests of `paths` (files, or directories of .yaml), resolved, with `overrides` merged into ConfigMaps' data by name. */
export function releaseManifests(
  paths: string[],
  resolve: (text: string) => string,
  overrides: Record<string, Record<string, string>> = {},
): string {
  const docs: string[] = [];
  for (const file of paths.flatMap(yamlFiles)) {
    for (const m of parseManifests(resolve(readFileSync(file, 'utf8')))) {
      const name = m.metadata?.name ?? '';
      if (m.kind === 'ConfigMap' && overrides[name]) {
        const cm = m as typeof m & { data?: Record<string, string> };
        docs.push(JSON.stringify({ ...cm, data: { ...cm.data, ...overrides[name] } }));
      } else docs.push(JSON.stringify(m));
    }
  }
  return docs.join('\n---\n');
}

/** Waits until each Deployment has all its replicas available for its current generation. */
export async function waitForDeploymentsAvailable(
  kc: KubeConfig,
  namespace: string,
  names: readonly string[],
  timeoutMs: number,
): Promise<void> {
  const apps = kc.makeApiClient(AppsV1Api);
  await Promise.all(
    names.map((name) =>
      waitFor(
        async () => {
          const d = await apps.readNamespacedDeployment({ name, namespace });
          const want = d.spec?.replicas ?? 1;
          if ((d.status?.availableReplicas ?? 0) >= want && d.status?.observedGeneration === d.metadata?.generation) return true;
          throw new Error(`${name}: ${d.status?.availableReplicas ?? 0}/${want} available`);
        },
        { what: `Deployment ${namespace}/${name} available`, timeoutMs, intervalMs: 500 },
      ),
    ),
  );
}

/**
 * Runs a component's install: on failure its webhook configurations go (they fail closed, and
 * nothing would answer them), and a wait that timed out says where the pods' logs are.
 */
export async function installOrClean(
  component: string,
  node: RealNode,
  cleanup: () => Promise<void>,
  install: () => Promise<void>,
): Promise<void> {
  try {
    await install();
  } catch (err) {
    await cleanup();
    if (err instanceof WaitTimeoutError) throw new ClusterStartError(`${component} pods: ${err.message} (pod logs: ${node.dir}/pod-logs)`);
    throw err;
  }
}

/** Every Deployment available, then the component's webhook answering through its Service (`probe` true). */
export async function waitForKnativeReady(
  kc: KubeConfig,
  namespace: string,
  deployments: readonly string[],
  probe: { what: string; check: () => Promise<boolean> },
  left: () => number,
): Promise<void> {
  await waitForDeploymentsAvailable(kc, namespace, deployments, left());
  await waitFor(probe.check, { what: probe.what, timeoutMs: left(), intervalMs: 500 });
}
