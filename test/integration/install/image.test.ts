// The gate and a built-in hook run from the built image (`npm run image`), in-cluster style: the
// release applied with kubectl to a fresh cluster, then each container of a release Deployment run
// the way a kubelet runs it (_pod.ts). The hold-and-release flow then works through them.
//
// What differs from a pod, and why: chroot isolation shares this machine's network, and the
// apiserver here cannot reach a Service. So each container gets listen addresses and ports of its
// own on 127.0.0.1, and the gate --webhook-url, which makes it register its webhooks by URL (with
// a certificate for 127.0.0.1) instead of through the Service, and --sink-url, where the hooks
// (on this machine too) send replies. Everything else is the Deployment's: env, args, user, identity.
import type { V1Deployment } from '@kubernetes/client-node';
import test from 'ava';
import { applyManifests } from '../../../devcluster/apply.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '../../../devcluster/gate/hook-server.ts';
import { type HookMethods, hookMethods } from '../../../devcluster/gate/hooks.ts';
import { asyncReply } from '../../../devcluster/gate/replies.ts';
import { isHeld, type RevisionMethods, revisionMethods } from '../../../devcluster/gate/revisions.ts';
import { knativeServingCrdDir } from '../../../devcluster/knative.ts';
import { freePorts } from '../../../devcluster/ports.ts';
import { waitFor } from '../../../devcluster/wait.ts';
import { type LocalImage, localImage } from '../../../release/build.ts';
import { type Pod, runOnce, runPod } from './_pod.ts';
import { freshCluster, type Installed } from './_support.ts';

const NAMESPACE = 'shop';
let image: LocalImage;
let installed: Installed;
let gate: Pod;
let gateImage: string;
let hooks: HookMethods;
let revisions: RevisionMethods;
const pods: Pod[] = [];
const servers: HookServer[] = [];

function deployment(file: string, name: string): V1Deployment {
  const d = installed.objects[file]?.find((o) => o.kind === 'Deployment' && o.metadata?.name === name);
  if (!d) throw new Error(`${file} has no Deployment ${name}`);
  return d as V1Deployment;
}

async function startPod(d: V1Deployment, extraArgs: string[]): Promise<Pod> {
  const { cluster } = installed;
  const pod = await runPod({
    admin: cluster.kubeConfig,
    apiserver: new URL(cluster.apiserverUrl),
    caCertPem: cluster.caCertPem,
    image,
    deployment: d,
    extraArgs,
  });
  pods.push(pod);
  return pod;
}

test.before(async () => {
  image = localImage();
  installed = await freshCluster(`localhost/knative-prestart@${image.digest}`);
  const admin = installed.cluster.kubeConfig;
  await applyManifests(admin, await knativeServingCrdDir());
  await installed.kubectl(
    'apply',
    '--server-side',
    '-f',
    `${installed.releaseDir}/knative-prestart.yaml`,
    '-f',
    `${installed.releaseDir}/knative-prestart-hooks.yaml`,
  );
  await installed.kubectl('create', 'namespace', NAMESPACE);
  hooks = hookMethods(admin, NAMESPACE);
  revisions = revisionMethods(admin, NAMESPACE);

  const d = deployment('knative-prestart.yaml', 'knative-prestart-gate');
  gateImage = d.spec?.template.spec?.containers[0]?.image ?? '';
  const [webhook, sink] = (await freePorts(2)) as [number, number];
  gate = await startPod(d, [
    '--webhook-host=127.0.0.1',
    `--webhook-port=${webhook}`,
    `--webhook-url=https://127.0.0.1:${webhook}`,
    '--sink-host=127.0.0.1',
    `--sink-port=${sink}`,
    `--sink-url=http://127.0.0.1:${sink}/events`,
  ]);
  await gate.waitReady(sink, d.spec?.template.spec?.containers[0]?.readinessProbe?.httpGet?.path ?? '/readyz');
});

test.after.always(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all(pods.map((p) => p.stop().catch(() => undefined)));
  await installed?.stop();
});

test.afterEach.always((t) => {
  if (!t.passed) for (const pod of pods) t.log(pod.log());
});

test.serial('the gate runs the image the release names, by digest, with the Deployment args', (t) => {
  t.is(gateImage, `localhost/knative-prestart@${gate.imageDigest}`);
  t.deepEqual(gate.command.slice(0, 3), ['/nodejs/bin/node', '/app/dist/cli/main.js', 'gate']);
  t.true(gate.command.includes('--namespace=knative-prestart'));
});

test.serial('nothing in the image is writable by its user, so a read-only root filesystem changes nothing', async (t) => {
  // Every path of the image (mounts of the runtime aside) that uid 65532 could write.
  const walk = `
    const fs = require('node:fs');
    const mounts = new Set(fs.readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\\n').map((l) => l.split(' ')[4]));
    const writable = [];
    const visit = (p) => {
      if (p !== '/' && mounts.has(p)) return;
      try { fs.accessSync(p, fs.constants.W_OK); writable.push(p); } catch {}
      const st = fs.lstatSync(p);
      if (st.isDirectory()) for (const e of fs.readdirSync(p)) visit(p === '/' ? '/' + e : p + '/' + e);
    };
    visit('/');
    console.log(JSON.stringify({ uid: process.getuid(), writable }));`;
  const out = JSON.parse(await runOnce(image, '65532', ['/nodejs/bin/node', '-e', walk])) as { uid: number; writable: string[] };
  t.is(out.uid, 65532);
  t.deepEqual(out.writable, []);
});

test.serial('the gate from the image holds a Revision until its hook answers, then releases it', async (t) => {
  const pending: ReceivedRequest[] = [];
  const server = await startHookServer(async (req) => {
    pending.push(req);
    return { status: 202 };
  });
  servers.push(server);
  const annotations = { 'prestart.test/hook': 'migrate' };
  await hooks.createHook('migrate', {
    match: hooks.annotationMatch('prestart.test/hook', 'migrate'),
    delivery: { transport: 'http', url: server.url },
  });
  await hooks.waitUntilStamped('migrate', annotations);

  const created = await revisions.createRevision('shop-00001', { annotations });
  t.true(isHeld(created), "the image's webhook stamps the hold");
  const denied = await revisions.createDeploymentLikeKnative(created);
  t.like(denied, { created: false, status: 403 });

  const request = await waitFor(() => pending[0], { timeoutMs: 30_000, what: 'the hook to receive its request' });
  t.is(request.data.revision.name, 'shop-00001');
  t.true(isHeld(await revisions.getRevision('shop-00001')), 'still held while the hook works');
  t.is((await asyncReply(request, 'succeeded', { message: 'migrated' })).status, 202);

  await revisions.waitReleased('shop-00001');
  const run = await revisions.waitForRun('shop-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.summary, '1/1');
  t.deepEqual(await revisions.createDeploymentLikeKnative(await revisions.getRevision('shop-00001')), { created: true });
  await hooks.deleteHook('migrate');
});

test.serial('the secret hook from the image, as its own ServiceAccount, binds the Secret and the gate releases', async (t) => {
  const d = deployment('knative-prestart-hooks.yaml', 'prestart-hook-secret');
  const [port] = (await freePorts(1)) as [number];
  const hook = await startPod(d, ['--host=127.0.0.1', `--port=${port}`]);
  await hook.waitReady(port, d.spec?.template.spec?.containers[0]?.readinessProbe?.httpGet?.path ?? '/healthz');
  t.deepEqual(hook.command.slice(1, 4), ['/app/dist/cli/main.js', 'hook', 'secret']);

  // What the admin runs for each namespace whose Secrets the hook may read (config/600-builtin-hooks.yaml).
  await installed.kubectl(
    ...['create', 'rolebinding', 'prestart-hook-secret', '-n', NAMESPACE, '--clusterrole=knative-prestart-hook-secret-namespace'],
    '--serviceaccount=knative-prestart:prestart-hook-secret',
  );
  const annotations = { 'prestart.test/hook': 'db' };
  await hooks.createHook('db', {
    match: hooks.annotationMatch('prestart.test/hook', 'db'),
    params: { secretName: '{{service}}-db' },
    contributions: { allowed: ['volume'] },
    delivery: { transport: 'http', url: `http://127.0.0.1:${port}/` },
  });
  await hooks.waitUntilStamped('db', annotations);
  await revisions.createRevision('cart-00001', { annotations });
  const waiting = await revisions.waitForRun('cart-00001', 'a word from the hook', (r) => Boolean(r.status?.hooks?.[0]?.message));
  t.regex(waiting.status?.hooks?.[0]?.message ?? '', /^waiting: Secret shop\/cart-db does not exist yet$/);
  t.true(isHeld(await revisions.getRevision('cart-00001')));

  await installed.kubectl('create', 'secret', 'generic', 'cart-db', '-n', NAMESPACE, '--from-literal=url=postgres://cart');
  await revisions.waitReleased('cart-00001');
  const run = await revisions.waitForRun('cart-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.deepEqual(run.status?.hooks?.[0]?.contributions, [{ name: 'cart-db', secretName: 'cart-db', as: 'volume' }]);
  await hooks.deleteHook('db');
});
