// The real kn, Knative's CLI (knative/client at the pinned tag), which devcluster/build-binaries.sh
// builds from the repository's source because the Go module proxy does not serve knative.dev/client.
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import { ClusterStartError } from './errors.ts';

/** Path of the cached kn binary; throws one clear line when it was not built. */
export function knBinary(): string {
  const version = pinnedVersions().KN_VERSION;
  if (!version) throw new ClusterStartError('devcluster/versions.env has no KN_VERSION');
  const path = join(cacheDir(), 'bin', `kn-${version}`, 'kn');
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new ClusterStartError(`missing ${path}: run ${BUILD_SCRIPT} kn (builds kn ${version} once from knative/client's source)`);
  }
  return path;
}
