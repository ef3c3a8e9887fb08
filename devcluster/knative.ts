// Knative's own manifests, read from its Go modules at the pinned versions (the same modules
// the e2e suite builds the controllers from): knative.dev/serving and knative.dev/eventing.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pinnedVersions } from './binaries.ts';
import { ClusterStartError } from './errors.ts';

const run = promisify(execFile);

const moduleDirs = new Map<string, Promise<string>>();

/** A module's directory in the Go module cache, downloading it (a few MB) when missing. */
function goModuleDir(module: string, version: string): Promise<string> {
  const key = `${module}@${version}`;
  let dir = moduleDirs.get(key);
  if (!dir) {
    dir = (async () => {
      try {
        const { stdout } = await run('go', ['mod', 'download', '-json', key], {
          cwd: '/',
          env: { ...process.env, GOFLAGS: '-mod=mod', GO111MODULE: 'on' },
          maxBuffer: 4 * 1024 * 1024,
        });
        return (JSON.parse(stdout) as { Dir: string }).Dir;
      } catch (err) {
        throw new ClusterStartError(`could not fetch ${key} with the go command: ${String(err).split('\n')[0]}`);
      }
    })();
    moduleDirs.set(key, dir);
  }
  return dir;
}

function pinned(key: string): string {
  const version = pinnedVersions()[key];
  if (!version) throw new ClusterStartError(`devcluster/versions.env has no ${key}`);
  return version;
}

/** knative.dev/serving at KNATIVE_SERVING_VERSION. */
export function knativeServingModuleDir(): Promise<string> {
  return goModuleDir('knative.dev/serving', pinned('KNATIVE_SERVING_VERSION'));
}

/** Knative Serving's CRDs (Service, Configuration, Revision, Route, ...). */
export async function knativeServingCrdDir(): Promise<string> {
  return join(await knativeServingModuleDir(), 'config', 'core', '300-resources');
}

/** knative.dev/eventing at KNATIVE_EVENTING_VERSION. */
export function knativeEventingModuleDir(): Promise<string> {
  return goModuleDir('knative.dev/eventing', pinned('KNATIVE_EVENTING_VERSION'));
}

/** Files of Knative Eventing's CRDs, by name under config/core/resources (e.g. "trigger", "broker"). */
export async function knativeEventingCrdFiles(...names: string[]): Promise<string[]> {
  const dir = join(await knativeEventingModuleDir(), 'config', 'core', 'resources');
  return names.map((n) => join(dir, `${n}.yaml`));
}
