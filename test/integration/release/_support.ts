// Shared by the install tests: a fresh real cluster of their own with the release applied the way
// an admin applies it (with kubectl). Not the shared cluster of the other test files: the release's
// webhook configuration names the gate's Service, which the apiserver cannot reach on this machine,
// and fails closed for Revisions in every namespace until a gate rewrites it.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import { BUILD_SCRIPT, controlPlaneBinaries } from '@knative-prestart/devcluster/binaries.ts';
import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import type { KubernetesObject } from '@kubernetes/client-node';
import { renderRelease, writeRelease } from '../../../release/build.ts';

const run = promisify(execFile);

export interface Installed {
  cluster: Cluster;
  /** The directory `npm run release` would have written: both release files and kustomization.yaml. */
  releaseDir: string;
  /** The objects of each release file, as parsed from it. */
  objects: Record<string, KubernetesObject[]>;
  kubectl(...args: string[]): Promise<{ stdout: string; stderr: string }>;
  stop(): Promise<void>;
}

/** A fresh cluster and the release for `image` written to a directory (applied by the caller). */
export async function freshCluster(image: string): Promise<Installed> {
  const { kubectl: kubectlPath } = controlPlaneBinaries();
  if (!existsSync(kubectlPath)) throw new Error(`missing ${kubectlPath}: run ${BUILD_SCRIPT} kubernetes`);
  const cluster = await startCluster({ progress: (line) => process.stderr.write(`install cluster: ${line}\n`) });
  const releaseDir = await mkdtemp(join(tmpdir(), 'knative-prestart-release-'));
  writeRelease(releaseDir, image);
  const objects = Object.fromEntries(Object.entries(renderRelease(image)).map(([name, text]) => [name, parseManifests(text)]));
  return {
    cluster,
    releaseDir,
    objects,
    kubectl: (...args) => run(kubectlPath, ['--kubeconfig', cluster.kubeconfigPath, ...args], { maxBuffer: 16 * 1024 * 1024 }),
    async stop() {
      await cluster.stop();
      await rm(releaseDir, { recursive: true, force: true });
    },
  };
}

/** How kubectl names an object in its output: `deployment.apps/knative-prestart-gate`. */
export function kubectlName(o: KubernetesObject): string {
  const group = o.apiVersion?.includes('/') ? `.${o.apiVersion.split('/')[0]}` : '';
  return `${o.kind?.toLowerCase()}${group}/${o.metadata?.name}`;
}
