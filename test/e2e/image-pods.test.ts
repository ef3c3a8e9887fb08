// The image of `npm run image` as the real node's kubelet runs it (what test/integration/release/
// image.test.ts checked with a kubelet imitation, _pod.ts, both retired for this file): the
// release installed as the README says (test/e2e/_gate-pods-setup.ts), then, inside the gate's
// pods, the process the container runs, and, in a one-shot pod of the same image as the release's
// user, whether anything of the image is writable by that user (so the release's read-only root
// filesystem takes nothing away). The hold and release through the image's gate and its secret
// hook are gate-pods.test.ts's. Needs: root, `build-binaries.sh node knative-serving-images`, `npm
// run image`.

import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import test from 'ava';
import {
  GATE_DEPLOYMENT,
  GATE_NS,
  type GatePodsEnv,
  type Installed,
  installRelease,
  removeRelease,
  startGatePodsEnv,
} from './_gate-pods-setup.ts';

const NS = 'image-pods-e2e';
let env: GatePodsEnv | undefined;
let installed: Installed | undefined;
const say = (line: string) => process.stdout.write(`image-pods: ${line}\n`);

test.before(async () => {
  env = await startGatePodsEnv({ progress: say });
  await env.createNamespace(NS);
  installed = await installRelease(env);
  say(`gate installed and rolled out in ${installed.installSeconds.toFixed(1)}s`);
});

test.after.always(async () => {
  await env?.stop();
  removeRelease(installed);
});

/** A Node.js one-liner run inside the image: prints one JSON line. */
const node = (script: string) => ['/nodejs/bin/node', '-e', script];

test.serial(
  "each gate pod runs the release's image by digest: the image's entrypoint with the Deployment's args, as uid 65532",
  async (t) => {
    if (!env || !installed) return t.fail('no gate installed');
    const core = env.cluster.kubeConfig.makeApiClient(CoreV1Api);
    const pods = (await core.listNamespacedPod({ namespace: GATE_NS, labelSelector: `app.kubernetes.io/name=${GATE_DEPLOYMENT}` })).items;
    t.true(pods.length >= 2);
    const deployment = await env.kubectl([
      '-n',
      GATE_NS,
      'get',
      `deployment/${GATE_DEPLOYMENT}`,
      '-o',
      'jsonpath={.spec.template.spec.containers[0].args}',
    ]);
    const args = JSON.parse(deployment) as string[];
    for (const pod of pods) {
      t.is(pod.spec?.containers[0]?.image, `localhost/knative-prestart@${installed.image.digest}`);
      t.regex(pod.status?.containerStatuses?.[0]?.imageID ?? '', new RegExp(`${installed.image.digest}$`));
      // What PID 1 of the container is, read inside it (kubectl exec through the kubelet).
      const out = await env.kubectl(
        [
          '-n',
          GATE_NS,
          'exec',
          pod.metadata?.name ?? '',
          '-c',
          'gate',
          '--',
          ...node(
            "const fs=require('node:fs');console.log(JSON.stringify({uid:process.getuid(),pid1:fs.readFileSync('/proc/1/cmdline','utf8').split('\\0').filter(Boolean)}))",
          ),
        ],
        30_000,
      );
      const seen = JSON.parse(out) as { uid: number; pid1: string[] };
      t.deepEqual(seen.pid1, ['/nodejs/bin/node', '/app/dist/cli/main.js', ...args]);
      t.is(seen.uid, 65532);
    }
    say(
      `${pods.length} gate pods run ${installed.image.digest.slice(0, 19)}…: ${['/nodejs/bin/node', '/app/dist/cli/main.js', ...args].slice(0, 4).join(' ')} …`,
    );
  },
);

test.serial('nothing in the image is writable by its user, so the release’s read-only root filesystem changes nothing', async (t) => {
  if (!env || !installed) return t.fail('no gate installed');
  const core = env.cluster.kubeConfig.makeApiClient(CoreV1Api);
  // Every path of the image (the mounts the kubelet adds aside) that uid 65532 could write.
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
  // The release's pod, but with a writable root filesystem: what the image itself allows.
  const pod: V1Pod = {
    metadata: { name: 'image-walk' },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'walk',
          image: `localhost/knative-prestart@${installed.image.digest}`,
          imagePullPolicy: 'Never',
          command: node(walk),
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  };
  await core.createNamespacedPod({ namespace: NS, body: pod });
  await waitFor(
    async () => {
      const p = await core.readNamespacedPod({ namespace: NS, name: 'image-walk' });
      if (p.status?.phase === 'Succeeded') return true;
      if (p.status?.phase === 'Failed') throw new Error('the walk failed');
      return false;
    },
    { what: 'pod image-walk Succeeded', timeoutMs: 60_000, intervalMs: 250 },
  );
  const out = JSON.parse(await env.kubectl(['-n', NS, 'logs', 'image-walk'])) as { uid: number; writable: string[] };
  t.is(out.uid, 65532);
  t.deepEqual(out.writable, []);
  say(`uid ${out.uid} can write ${out.writable.length} paths of the image`);
});
