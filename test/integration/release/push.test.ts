// The image an admin pushes is the image the release names: `skopeo copy --preserve-digests` of the
// OCI archive into a real registry (Debian's docker-registry, on 127.0.0.1) keeps the digest that
// `npm run release` pins, so the cluster pulls exactly what was built and tested.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { type Component, logTail, startComponent, stopComponents } from '@knative-prestart/devcluster/processes.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { imageReference, localImage } from '../../../release/build.ts';

const run = promisify(execFile);
let dir: string;
let registry: Component | undefined;
let address: string;

test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'registry-'));
  const [port] = (await freePorts(1)) as [number];
  address = `127.0.0.1:${port}`;
  const config = join(dir, 'config.yml');
  await writeFile(config, `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\nhttp:\n  addr: ${address}\n`);
  registry = startComponent({ name: 'docker-registry', command: 'docker-registry', args: ['serve', config] }, dir);
  const up = registry;
  await waitFor(
    () =>
      fetch(`http://${address}/v2/`).then(
        (r) => r.ok,
        () => false,
      ),
    {
      timeoutMs: 30_000,
      what: 'docker-registry to serve /v2/',
      bail: () => (up.exitInfo ? new Error(`docker-registry exited:\n${logTail(up.logFile)}`) : undefined),
    },
  );
});

test.after.always(async () => {
  if (registry) await stopComponents([registry], 5000);
  await rm(dir, { recursive: true, force: true });
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
  const res = await fetch(`http://${address}/v2/knative-prestart/manifests/${pushed}`, {
    headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
  });
  t.is(res.status, 200);
});
