// A hook that builds the Revision's image, end to end on Knative Serving's own controllers
// (docs/hooks.md, "A hook that builds the image"). Knative resolves a tag to a digest before it
// creates the Deployment, so a Revision whose image is not pushed yet fails ContainerMissing
// before the hold matters, and the gate asks no hook before Knative has resolved: a build hook is
// never asked. With the build registry in config-deployment's registries-skipping-tag-resolving,
// Knative leaves the tag alone, the hold gates the start, and the hook builds and pushes the tag
// before it answers.
//
// Real here: Knative's reconcilers with their tag resolver (go-containerregistry, which asks the
// registry for the manifest), a real registry (Debian's docker-registry on 127.0.0.1,
// devcluster/registry.ts), real builds and pushes (buildah, image/buildah.sh), the gate, the hook
// SDK. The one registry is named two ways: as 127.0.0.1:PORT, listed in
// registries-skipping-tag-resolving (the build registry), and as localhost:PORT, which Knative
// resolves (Knative compares the registry as written in the image reference).
// Stand-in: kwok plays the kubelet, so nothing pulls the image: the test is about resolution, the
// hold and what the Deployment names (docs/testing.md).
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import {
  type CoreEvent,
  condition,
  firstSighting,
  Knative,
  type KnativeObject,
  retryTimes,
  waitForRevision,
  watchCollection,
} from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { type Registry, startRegistry } from '@knative-prestart/devcluster/registry.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import type { V1Deployment } from '@kubernetes/client-node';
import test from 'ava';
import pino from 'pino';
import { fail, type HookRequest, type HookServer, serveHook, succeed } from '../../hooks/index.ts';

const run = promisify(execFile);
const buildah = fileURLToPath(new URL('../../image/buildah.sh', import.meta.url));

let registry: Registry;
let env: GateEnv;
let serving: KnativeServing;
let kn: Knative;
let hook: HookServer;
/** The build registry, skipped by Knative's tag resolution, and the same registry by a name Knative resolves. */
let buildRegistry: string;
let resolvedRegistry: string;

const BUILD = 'prestart-build';
/** Per Revision: the request the build hook got, and the digest its image had in the registry at that moment. */
const asked = new Map<string, { request: HookRequest; digestWhenAsked: string | undefined; at: number }>();
/** Per Revision: what the hook built and pushed, and how long it took. */
const built = new Map<string, { digest: string; ms: number }>();

/** `registry/repository:tag` → the registry's name for it (`repository`, `tag`). */
function splitTag(image: string): { repository: string; tag: string } {
  const path = image.slice(image.indexOf('/') + 1);
  const colon = path.lastIndexOf(':');
  return { repository: path.slice(0, colon), tag: path.slice(colon + 1) };
}

/** Builds a one-file image FROM scratch with buildah and pushes it to `target` (a tag); resolves to the pushed digest. */
async function buildAndPush(target: string, source: string, signal?: AbortSignal): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'prestart-build-'));
  const local = `localhost/${BUILD}-${process.pid}-${Date.now()}:latest`;
  try {
    await writeFile(join(dir, 'app.txt'), source);
    await writeFile(join(dir, 'Containerfile'), 'FROM scratch\nCOPY app.txt /app.txt\n');
    const opts = { timeout: 120_000, ...(signal ? { signal } : {}) };
    await run(
      buildah,
      ['bud', '--quiet', '--isolation', 'chroot', '--format', 'oci', '-f', join(dir, 'Containerfile'), '-t', local, dir],
      opts,
    );
    const digestFile = join(dir, 'digest');
    await run(buildah, ['push', '--quiet', '--tls-verify=false', '--digestfile', digestFile, local, `docker://${target}`], opts);
    return (await readFile(digestFile, 'utf8')).trim();
  } finally {
    await run(buildah, ['rmi', local]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

test.before(async () => {
  registry = await startRegistry();
  buildRegistry = registry.host;
  resolvedRegistry = registry.host.replace('127.0.0.1', 'localhost');
  env = await gateEnv('e2e-build');
  serving = await startKnativeServing(env.cluster, {
    progress: (line) => process.stderr.write(`e2e: ${line}\n`),
    configOverrides: {
      'config-deployment': { 'registries-skipping-tag-resolving': `kind.local,ko.local,dev.local,${buildRegistry}` },
    },
  });
  kn = new Knative(env.admin, env.namespace);

  // The build hook: for each container Knative did not pin (no digest: a registry it skips), it
  // builds the tag the Revision names, in the build registry only, and pushes it before it answers.
  hook = await serveHook({
    name: `${env.instance}-build`,
    host: '127.0.0.1',
    port: 0,
    sink: '',
    logger: pino({ name: 'build-hook', level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
    handler: async (req, ctx) => {
      const at = performance.now();
      const containers = req.revision.containers;
      if (!containers) return fail('the request does not say what will run (a gate older than protocol version 2)');
      const first = containers[0];
      const whenAsked = first && (await registry.digestOf(splitTag(first.image).repository, splitTag(first.image).tag));
      asked.set(req.revision.name, { request: req, at, digestWhenAsked: whenAsked || undefined });
      const done: string[] = [];
      for (const c of containers) {
        if (c.digest) continue;
        if (!c.image.startsWith(`${req.params.registry}/`)) {
          return fail(`container ${c.name}: ${c.image} is neither pinned by Knative nor in the build registry ${req.params.registry}`);
        }
        // Idempotent: a tag already there (a redelivery, an admin's retry) is not pushed again, so the hook never moves it.
        const existing = await registry.digestOf(splitTag(c.image).repository, splitTag(c.image).tag);
        if (existing) {
          done.push(`${c.image} already built as ${existing}`);
          continue;
        }
        await ctx.progress(10, `building ${c.image}`);
        const started = performance.now();
        const digest = await buildAndPush(c.image, `${req.revision.namespace}/${req.revision.name} ${c.name}\n`, ctx.signal);
        built.set(req.revision.name, { digest, ms: performance.now() - started });
        done.push(`built and pushed ${c.image} as ${digest}`);
      }
      return succeed(done.length > 0 ? done.join(', ') : 'nothing to build: Knative pinned every image');
    },
  });
  await env.createHook(`${env.instance}-build`, {
    match: env.annotationMatch('build', 'app'),
    params: { registry: buildRegistry },
    timeout: '2m',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(`${env.instance}-build`, { build: 'app' });
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
  await serving?.stop();
  await registry?.stop();
});

const revision = (name: string, what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 30_000) =>
  waitForRevision(kn, name, what, ok, { timeoutMs, logs: serving.controllerLog });
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const askedFor = (name: string) => waitFor(() => asked.get(name), { timeoutMs: 30_000, what: `the build hook to be asked about ${name}` });
const deploymentImage = (d: V1Deployment) => d.spec?.template.spec?.containers.find((c) => c.name === 'user-container')?.image;

test.serial(
  'build registry skipped: the hook is asked about a tag that does not exist yet, builds and pushes it, and the released Revision runs it',
  async (t) => {
    const image = `${buildRegistry}/${env.namespace}/app:build-1`;
    const { repository, tag } = splitTag(image);
    t.is(await registry.digestOf(repository, tag), undefined, 'the tag is not in the registry when the Service is created');
    const deployments = await watchCollection<V1Deployment>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);
    t.teardown(() => deployments.stop());

    const created = performance.now();
    await kn.createService('app', { image, annotations: { build: 'app' } });
    const held = await revision('app-00001', 'created by Knative', () => true);
    t.true(isHeld(held), 'the Revision is held');

    const { request, digestWhenAsked, at } = await askedFor('app-00001');
    t.is(digestWhenAsked, undefined, 'the hook was asked while the tag did not exist');
    t.deepEqual(request.revision.containers, [{ name: 'user-container', image }], 'the request names the tag, with no digest');
    // Knative skipped resolution: one status per container, without a digest, and nothing failed.
    const skipped = await kn.revision('app-00001');
    t.deepEqual(skipped?.status?.containerStatuses, [{ name: 'user-container' }]);
    t.not(condition(skipped, 'ContainerHealthy')?.status, 'False', 'no ContainerMissing');

    const released = await env.waitForRun(
      'app-00001',
      'Released or Failed',
      (r) => r.status?.phase === 'Released' || r.status?.phase === 'Failed',
      60_000,
    );
    t.is(released.status?.phase, 'Released', `the build hook answered: ${released.status?.hooks?.[0]?.message}`);
    const build = built.get('app-00001');
    t.truthy(build, 'the hook built the image');
    t.regex(released.status?.hooks?.[0]?.message ?? '', new RegExp(`built and pushed ${image} as ${build?.digest}`));
    t.deepEqual(released.spec?.containers, [{ name: 'user-container', image }], 'the run records the tag: no digest to guard');
    t.is(await registry.digestOf(repository, tag), build?.digest, 'the tag names what the hook pushed');

    const deployment = await firstSighting(
      deployments.seen,
      (d) => d.metadata?.labels?.['serving.knative.dev/revision'] === 'app-00001',
      'Knative to create the Deployment of app-00001',
      30_000,
    );
    t.is(deploymentImage(deployment.object), image, 'Knative runs the tag as written, not a digest');
    const ready = await revision('app-00001', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
    t.false(isHeld(ready));
    t.log(
      `asked ${seconds(at - created)} after the Service was created; build and push took ${seconds(build?.ms ?? 0)}; ` +
        `Deployment ${seconds(deployment.at - created)} and Ready ${seconds(performance.now() - created)} after the create`,
    );
  },
);

test.serial(
  'registry resolved: ContainerMissing before the hold matters, the hook is not asked, and only an image pushed by someone else lets Knative’s retry go on',
  async (t) => {
    const image = `${resolvedRegistry}/${env.namespace}/api:build-1`;
    const events = await watchCollection<CoreEvent>(env.admin, `/api/v1/namespaces/${env.namespace}/events`, {
      fieldSelector: 'involvedObject.name=api-00001',
    });
    const deployments = await watchCollection<V1Deployment>(env.admin, `/apis/apps/v1/namespaces/${env.namespace}/deployments`);
    t.teardown(() => {
      events.stop();
      deployments.stop();
    });

    const created = performance.now();
    await kn.createService('api', { image, annotations: { build: 'app' } });
    const missing = await revision(
      'api-00001',
      'ContainerHealthy=False/ContainerMissing',
      (r) => condition(r, 'ContainerHealthy')?.reason === 'ContainerMissing',
    );
    t.true(isHeld(missing), 'held, but the hold is not what stops it');
    t.is(condition(missing, 'Ready')?.status, 'False', 'Knative reports the Revision failed');
    t.regex(condition(missing, 'ContainerHealthy')?.message ?? '', /Unable to fetch image ".*": failed to resolve image to digest/);
    t.is(missing.status?.containerStatuses, undefined, 'no digest, so no container status');
    const failedService = await waitFor(
      async () => {
        const svc = await kn.service('api');
        return condition(svc, 'Ready')?.status === 'False' ? svc : undefined;
      },
      { what: 'Service api to report its Revision failed' },
    );
    t.log(`Service api: Ready=False ${condition(failedService, 'Ready')?.reason}: ${condition(failedService, 'Ready')?.message}`);

    // The gate waits for the digests and says why; the build hook is never asked.
    const waiting = await env.waitForRun('api-00001', 'Ready=False ContainerMissing', (r) =>
      (r.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.reason === 'ContainerMissing'),
    );
    t.is(waiting.status?.phase, 'Pending');
    t.is(waiting.spec?.containers, undefined, 'nothing recorded, nothing requested');
    t.regex(
      waiting.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '',
      /Knative could not resolve the image digests .*no hook is asked before it has, and Knative retries/,
    );
    t.false(asked.has('api-00001'), 'the build hook was not asked');

    // Knative retries the resolution on its own, each failure a Warning InternalError event.
    const tries = await waitFor(
      () => {
        const r = retryTimes(events.seen);
        return r.length >= 4 ? r : undefined;
      },
      { timeoutMs: 60_000, what: 'four failed resolutions of api-00001 (its InternalError events)' },
    );
    const failure = events.seen.find((e) => e.object.reason === 'InternalError');
    t.regex(failure?.object.message ?? '', /failed to resolve image to digest/);
    const gaps = tries.slice(1).map((r, i) => r.at - (tries[i] as { at: number }).at);
    t.log(`Knative's resolution attempts after the create: ${tries.map((r) => `+${seconds(r.at - created)}`).join(', ')}`);
    t.log(`gaps: ${gaps.map(seconds).join(', ')}`);
    t.true(
      gaps.every((g, i) => i === 0 || g > (gaps[i - 1] ?? 0)),
      `the gaps grow (Knative's back-off per Revision and image doubles): ${gaps.map(seconds).join(', ')}`,
    );
    t.false(asked.has('api-00001'), 'still not asked after four failed resolutions');

    // Someone else (a CI pipeline) builds and pushes the tag; Knative's next retry resolves it.
    const pushed = await buildAndPush(image, 'built outside the hook\n');
    const pushedAt = performance.now();
    const resolved = await revision(
      'api-00001',
      'resolved after the push',
      (r) => r.status?.containerStatuses?.[0]?.imageDigest !== undefined,
      60_000,
    );
    const pinned = `${resolvedRegistry}/${env.namespace}/api@${pushed}`;
    t.is(resolved.status?.containerStatuses?.[0]?.imageDigest, pinned, 'Knative pinned the pushed digest');
    t.log(`Knative resolved the tag ${seconds(performance.now() - pushedAt)} after the push (its back-off decides when)`);

    const { request } = await askedFor('api-00001');
    t.deepEqual(request.revision.containers, [{ name: 'user-container', image, digest: pinned }], 'asked with the digest');
    await env.waitForRun('api-00001', 'Released', (r) => r.status?.phase === 'Released', 60_000);
    t.false(built.has('api-00001'), 'the hook built nothing: the image was pinned');
    const deployment = await firstSighting(
      deployments.seen,
      (d) => d.metadata?.labels?.['serving.knative.dev/revision'] === 'api-00001',
      'Knative to create the Deployment of api-00001',
      30_000,
    );
    t.is(deploymentImage(deployment.object), pinned, 'Knative runs the digest');
    await revision('api-00001', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', 60_000);
  },
);
