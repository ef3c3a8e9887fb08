// The previous release (PREVIOUS_RELEASE, test/integration/release/_previous.ts) as an image, for
// the upgrade on the real node. That commit predates image/ and release/: its README told an admin
// to build it with `npm ci && npm run build` (tsc into dist/, entrypoint `node dist/gate/cli.js`)
// and to put the image in config/500-gate.yaml. So: its tree (git archive, this tree's
// node_modules linked, a superset at the same versions) compiled with its own tsconfig, and its
// dist/ laid over this release's image (the same Node, and production node_modules that are a
// superset of its own), with its own entrypoint. Built with buildah (image/buildah.sh), kept in the
// cache by commit, and written as an OCI archive for the node's containerd.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cacheDir } from '@knative-prestart/devcluster/binaries.ts';
import { previousRelease } from '../integration/release/_previous.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
/** The image placeholder of the previous release's config/500-gate.yaml. */
const PLACEHOLDER = 'registry.example.invalid/knative-prestart/gate:0.1.0';

export interface PreviousImage {
  commit: string;
  ref: string;
  archive: string;
  /** The previous release's manifests, in apply order, its image placeholder replaced by `ref`. */
  manifests: string;
}

export async function previousImage(current: { archive: string }): Promise<PreviousImage> {
  const prev = await previousRelease();
  const commit = prev.commit.slice(0, 12);
  const ref = `localhost/knative-prestart:prev-${commit}`;
  const archive = join(cacheDir(), 'images', `knative-prestart-prev-${commit}.oci.tar`);
  if (!existsSync(archive)) {
    // tsc exits non-zero on a type error in a file the gate does not run (its tests, benches); what it emitted is what counts.
    await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
      cwd: prev.dir,
      timeout: 300_000,
    }).catch(() => undefined);
    if (!existsSync(join(prev.dir, 'dist', 'gate', 'cli.js')))
      throw new Error(`the previous release (${commit}) did not build: no dist/gate/cli.js`);
    const context = await mkdtemp(join(tmpdir(), 'knative-prestart-prev-image-'));
    try {
      await cp(join(prev.dir, 'dist'), join(context, 'dist'), { recursive: true });
      // Under /app, so that Node finds this image's /app/node_modules and /app/package.json ("type": "module").
      await writeFile(
        join(context, 'Containerfile'),
        [`FROM oci-archive:${current.archive}`, 'COPY dist /app/prev', 'ENTRYPOINT ["/nodejs/bin/node", "/app/prev/gate/cli.js"]', ''].join(
          '\n',
        ),
      );
      const bh = join(root, 'image', 'buildah.sh');
      await run(
        bh,
        ['bud', '--isolation', 'chroot', '--format', 'oci', '--timestamp', '0', '-f', join(context, 'Containerfile'), '-t', ref, context],
        {
          timeout: 300_000,
        },
      );
      await run(bh, ['push', '--quiet', ref, `oci-archive:${archive}.tmp:${ref}`], { timeout: 300_000 });
      await run('mv', [`${archive}.tmp`, archive]);
    } finally {
      await rm(context, { recursive: true, force: true });
    }
  }
  const docs = await Promise.all(prev.configFiles.map((f) => readFile(f, 'utf8')));
  const manifests = join(prev.dir, 'previous-release.yaml');
  await writeFile(manifests, docs.map((d) => d.replaceAll(PLACEHOLDER, ref)).join('\n---\n'));
  if (!readFileSync(manifests, 'utf8').includes(ref)) throw new Error(`the previous release names no image ${PLACEHOLDER} to replace`);
  return { commit, ref, archive, manifests };
}
