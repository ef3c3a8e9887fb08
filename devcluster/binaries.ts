import { accessSync, constants, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClusterStartError } from './errors.ts';

const here = dirname(fileURLToPath(import.meta.url));

/** The build script that fills the binary cache; named in every "missing binary" message. */
export const BUILD_SCRIPT = 'devcluster/build-binaries.sh';
export const BUILD_SCRIPT_PATH = join(here, 'build-binaries.sh');

export interface ControlPlaneBinaries {
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubectl: string;
  kwok: string;
  /** kwok Stage objects (node/pod lifecycle) copied from the kwok module by the build script. */
  kwokStages: string;
}

/** Same default as build-binaries.sh, so both agree on where binaries live. */
export function cacheDir(): string {
  return process.env.KNATIVE_PRESTART_CACHE || join(homedir(), '.cache', 'knative-prestart');
}

/** The pinned versions of every component this package builds (KEY=value lines, shell quoting). */
export const VERSIONS_FILE = join(here, 'versions.env');

/** The env variable naming another versions file than versions.env (a compatibility-matrix cell's). */
export const VERSIONS_FILE_ENV = 'KNATIVE_PRESTART_VERSIONS';

/** The pinned versions from versions.env, or the file $KNATIVE_PRESTART_VERSIONS names (KEY=value lines, shell quoting). */
export function pinnedVersions(): Record<string, string> {
  const out: Record<string, string> = {};
  const file = process.env[VERSIONS_FILE_ENV] || VERSIONS_FILE;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(?:"([^"]*)"|(\S*))/.exec(line.trim());
    const value = m?.[2] ?? m?.[3];
    if (m?.[1] && value) out[m[1]] = value;
  }
  return out;
}

function pinned(versions: Record<string, string>, key: string): string {
  const v = versions[key];
  if (!v) throw new ClusterStartError(`devcluster/versions.env has no ${key}`);
  return v;
}

/**
 * Paths of the cached binaries at the pinned versions; throws one clear line when any is missing.
 * `kwok: false`: a cluster with no kwok node (its only node the real one) does not need kwok.
 */
export function controlPlaneBinaries({ kwok = true }: { kwok?: boolean } = {}): ControlPlaneBinaries {
  const v = pinnedVersions();
  const bin = join(cacheDir(), 'bin');
  const k8s = join(bin, `kubernetes-${pinned(v, 'KUBERNETES_VERSION')}`);
  const kwokDir = join(bin, `kwok-${pinned(v, 'KWOK_VERSION')}`);
  const paths: ControlPlaneBinaries = {
    etcd: join(bin, `etcd-${pinned(v, 'ETCD_VERSION')}`, 'etcd'),
    kubeApiserver: join(k8s, 'kube-apiserver'),
    kubeControllerManager: join(k8s, 'kube-controller-manager'),
    kubeScheduler: join(k8s, 'kube-scheduler'),
    kubectl: join(k8s, 'kubectl'),
    kwok: join(kwokDir, 'kwok'),
    kwokStages: join(kwokDir, 'stages.yaml'),
  };
  // kubectl is for people poking at a cluster, not for starting one: not required here.
  const { kubectl: _, kwok: kwokBin, kwokStages, ...required } = paths;
  const missing = Object.values(kwok ? { ...required, kwokBin, kwokStages } : required).filter(
    (p) => !usable(p, p.endsWith('.yaml') ? constants.R_OK : constants.X_OK),
  );
  if (missing.length > 0) {
    const names = missing.map((p) => relative(bin, p)).join(', ');
    throw new ClusterStartError(`missing control-plane binaries in ${bin} (${names}): run ${BUILD_SCRIPT} all (builds them once)`);
  }
  return paths;
}

function usable(path: string, mode: number): boolean {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
}
