// The image an admin pushes is the image the release names: `skopeo copy --preserve-digests` of the
// OCI archive into a real registry (Debian's docker-registry, on 127.0.0.1) keeps the digest that
// `npm run release` pins, so the cluster pulls exactly what was built and tested.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { type Registry, startRegistry } from '@knative-prestart/devcluster/registry.ts';
import test from 'ava';
import { imageReference, localImage } from '../../../release/build.ts';

const run = promisify(execFile);
let registry: Registry | undefined;
let address: string;

test.before(async () => {
  registry = await startRegistry();
  address = registry.host;
});

test.after.always(async () => {
  await registry?.stop();
});

test('skopeo copy --preserve-digests pushes the archive under the digest the release pins', async (t) => {
  const image = localImage();
  const target = `${address}/knative-prestart`;
  await run('skopeo', [
    'copy',
    '--quiet',
    '--preserve-digests',
    '--dest-tls-verify=false',
    `oci-archive:${image.archive}`,
    `docker://${target}:0.1.0`,
  ]);
  const { stdout } = await run('skopeo', ['inspect', '--tls-verify=false', `docker://${target}:0.1.0`]);
  const pushed = (JSON.parse(stdout) as { Digest: string }).Digest;
  t.is(pushed, image.digest);
  t.is(imageReference(target), `${target}@${pushed}`);
  // What a kubelet pulls: the manifest by digest.
  t.is(await registry?.digestOf('knative-prestart', pushed), pushed);
});
