// The real node (devcluster/node.ts): containerd + runc run the pods a real kubelet gets from
// the devcluster's apiserver, on a CNI bridge, with kube-proxy for Services and CoreDNS for
// cluster DNS. A Deployment of the test app (an image built here from scratch plus a static Go
// binary) becomes Ready on it and answers from the host at its pod IP and its ClusterIP; a second
// pod reaches it by its Service's DNS name; a killed container is restarted; and once the node
// stops, nothing of it is left on the host (processes, bridge, iptables chains, sysctls).
// A pod reaches the apiserver through Service default/kubernetes with its mounted ServiceAccount
// token and CA, and `kubectl logs` and `kubectl exec` reach the kubelet through the apiserver.
// Traffic goes only to the bridge's pods and to ClusterIPs that kube-proxy sends there.

import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { controlPlaneBinaries } from '@knative-prestart/devcluster/binaries.ts';
import { containerdLayout, ctr } from '@knative-prestart/devcluster/containerd.ts';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { type RealNode, realNodeUnavailable, startNode } from '@knative-prestart/devcluster/node.ts';
import { iptablesChains, readSysctl, WATCHED_SYSCTLS } from '@knative-prestart/devcluster/node-host.ts';
import { sharedCluster } from '@knative-prestart/devcluster/shared.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AppsV1Api, CoreV1Api, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import test from 'ava';

const NS = 'real-node-e2e';
let cluster: Cluster;
let node: RealNode | undefined;
let core: CoreV1Api;
let apps: AppsV1Api;
const sysctlsBefore: Record<string, string | undefined> = {};
const say = (line: string) => process.stdout.write(`real-node: ${line}\n`);

test.before(async () => {
  const unavailable = realNodeUnavailable();
  if (unavailable) throw new Error(unavailable);
  cluster = await sharedCluster();
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
  for (const s of WATCHED_SYSCTLS) sysctlsBefore[s] = readSysctl(s);
  node = await startNode(cluster, { progress: (line) => say(line) });
  say(`node start: ${node.startSeconds.toFixed(1)}s`);
  await core.createNamespace({ body: { metadata: { name: NS } } });
});

test.after.always(async () => {
  await node?.stop();
  await core?.deleteNamespace({ name: NS }).catch(() => undefined);
});

function readyPods(pods: V1Pod[]): V1Pod[] {
  return pods.filter(
    (p) => p.metadata?.deletionTimestamp === undefined && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
}

async function webPod(): Promise<V1Pod> {
  return waitFor(async () => readyPods((await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=web' })).items)[0], {
    what: 'a Ready pod of Deployment web',
    timeoutMs: 60_000,
  });
}

async function getJson(url: string): Promise<{ hostname: string; env: Record<string, string>; remote: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return (await res.json()) as { hostname: string; env: Record<string, string>; remote: string };
}

test.serial('a Deployment of the test app becomes Ready on the real node and answers from the host', async (t) => {
  if (!node) return t.fail('no node');
  const t0 = performance.now();
  await apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            ...node.placement(),
            terminationGracePeriodSeconds: 2,
            containers: [
              {
                name: 'app',
                image: node.images.testApp,
                imagePullPolicy: 'Never',
                env: [{ name: 'GREETING', value: 'hello from the real node' }],
                ports: [{ containerPort: 8080 }],
                readinessProbe: { httpGet: { path: '/ready', port: 8080 }, periodSeconds: 1 },
                resources: { limits: { memory: '32Mi' } },
              },
            ],
          },
        },
      },
    },
  });
  await core.createNamespacedService({
    namespace: NS,
    body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] } },
  });
  const pod = await webPod();
  const readySeconds = (performance.now() - t0) / 1000;
  say(`first pod Ready ${readySeconds.toFixed(1)}s after the Deployment was created`);
  t.log(`node start ${node.startSeconds.toFixed(1)}s, first pod Ready ${readySeconds.toFixed(1)}s`);
  t.is(pod.spec?.nodeName, node.name);
  const podIp = pod.status?.podIP ?? '';
  t.true(podIp.startsWith(node.podCidr.split('.').slice(0, 3).join('.')), `pod IP ${podIp} in ${node.podCidr}`);

  const direct = await getJson(`http://${podIp}:8080/`);
  t.is(direct.hostname, pod.metadata?.name ?? '');
  t.is(direct.env.GREETING, 'hello from the real node');
  // The kubelet's Service environment variables, as in any cluster.
  t.truthy(direct.env.KUBERNETES_SERVICE_HOST);

  // Through kube-proxy: the ClusterIP from the host (routed onto the bridge, DNAT to the pod).
  const svc = await core.readNamespacedService({ name: 'web', namespace: NS });
  const viaService = await waitFor(() => getJson(`http://${svc.spec?.clusterIP}:80/`), {
    what: 'the ClusterIP of web answering',
    timeoutMs: 30_000,
  });
  t.is(viaService.hostname, pod.metadata?.name ?? '');
});

/** A one-shot pod of the test app (`test-app fetch URL`, `test-app kube PATH`): its exit code and termination message are its answer. */
function testAppJob(name: string, args: [string, string], timeout: string): V1Pod {
  return {
    metadata: { name },
    spec: {
      ...node?.placement(),
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: args[0],
          image: node?.images.testApp ?? '',
          imagePullPolicy: 'Never',
          args,
          env: [{ name: 'FETCH_TIMEOUT', value: timeout }],
          terminationMessagePolicy: 'File',
        },
      ],
    },
  };
}

test.serial('a second pod reaches the app by its Service DNS name; names outside the cluster are not resolved', async (t) => {
  if (!node) return t.fail('no node');
  const fetchPod = (name: string, url: string, timeout: string) => testAppJob(name, ['fetch', url], timeout);
  await core.createNamespacedPod({ namespace: NS, body: fetchPod('client', `http://web.${NS}.svc.cluster.local/from-client`, '60s') });
  // A name CoreDNS does not serve: REFUSED by CoreDNS (no forward plugin), nothing leaves.
  await core.createNamespacedPod({ namespace: NS, body: fetchPod('outside', 'http://knative.dev/', '3s') });
  const finished = (name: string) =>
    waitFor(
      async () => {
        const p = await core.readNamespacedPod({ name, namespace: NS });
        const term = p.status?.containerStatuses?.[0]?.state?.terminated;
        const phase = p.status?.phase;
        return term && (phase === 'Succeeded' || phase === 'Failed')
          ? { phase, exitCode: term.exitCode, message: term.message ?? '' }
          : undefined;
      },
      { what: `pod ${name} finished`, timeoutMs: 90_000 },
    );
  const [client, outside] = await Promise.all([finished('client'), finished('outside')]);
  t.is(client.exitCode, 0, client.message);
  t.is(client.phase, 'Succeeded');
  const answer = JSON.parse(client.message) as { hostname: string; path: string };
  const web = await webPod();
  t.is(answer.hostname, web.metadata?.name ?? '');
  t.is(answer.path, '/from-client');
  t.is(outside.exitCode, 1);
  t.regex(outside.message, /no such host|server misbehaving|refused/i);
  say(`outside name from a pod: ${outside.message}`);
});

test.serial('a pod lists pods through Service kubernetes with its ServiceAccount token and CA; kubectl logs and exec answer', async (t) => {
  if (!node) return t.fail('no node');
  const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  // The default ServiceAccount may read pods of its namespace, nothing else.
  await rbac.createNamespacedRoleBinding({
    namespace: NS,
    body: {
      metadata: { name: 'default-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: NS }],
    },
  });
  const kubePod = (name: string, path: string, timeout: string) => testAppJob(name, ['kube', path], timeout);
  const t0 = performance.now();
  await core.createNamespacedPod({ namespace: NS, body: kubePod('api-client', `/api/v1/namespaces/${NS}/pods`, '60s') });
  // Not granted: the apiserver knows who asks (the retries end with its 403).
  await core.createNamespacedPod({ namespace: NS, body: kubePod('api-forbidden', '/api/v1/namespaces/kube-system/secrets', '2s') });
  const finished = (name: string) =>
    waitFor(
      async () => {
        const p = await core.readNamespacedPod({ name, namespace: NS });
        const term = p.status?.containerStatuses?.[0]?.state?.terminated;
        return term ? { exitCode: term.exitCode, message: term.message ?? '' } : undefined;
      },
      { what: `pod ${name} finished`, timeoutMs: 90_000 },
    );
  const [allowed, forbidden] = await Promise.all([finished('api-client'), finished('api-forbidden')]);
  t.is(allowed.exitCode, 0, allowed.message);
  t.is(forbidden.exitCode, 1);
  t.regex(forbidden.message, /answered 403/);

  // The apiserver to the kubelet: its client certificate, the kubelet's serving cert verified
  // against the cluster CA. The PodList is read from the client's log (a termination message
  // keeps only 4 KiB).
  const kubectl = controlPlaneBinaries().kubectl;
  const run = promisify(execFile);
  const kc = ['--kubeconfig', cluster.kubeconfigPath, '-n', NS];
  const logs = await run(kubectl, [...kc, 'logs', 'api-client'], { timeout: 30_000 });
  const body =
    logs.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .pop() ?? '';
  const list = JSON.parse(body) as { kind: string; items: { metadata: { name: string } }[] };
  t.is(list.kind, 'PodList');
  const web = await webPod();
  t.true(
    list.items.some((p) => p.metadata.name === web.metadata?.name),
    list.items.map((p) => p.metadata.name).join(' '),
  );
  say(`a pod listed its namespace's pods through https://kubernetes.default.svc in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  const webLogs = await run(kubectl, [...kc, 'logs', web.metadata?.name ?? ''], { timeout: 30_000 });
  t.regex(webLogs.stdout, /test-app \S+ listening on :8080/);
  const exec = await run(kubectl, [...kc, 'exec', web.metadata?.name ?? '', '--', '/test-app', 'fetch', 'http://127.0.0.1:8080/via-exec'], {
    timeout: 30_000,
  });
  t.is((JSON.parse(exec.stdout) as { path: string }).path, '/via-exec');
  say(`kubectl logs: ${webLogs.stdout.trim()}`);
});

test.serial('a killed container is restarted by the kubelet', async (t) => {
  if (!node) return t.fail('no node');
  const before = await webPod();
  const containerId = (before.status?.containerStatuses?.[0]?.containerID ?? '').replace(/^containerd:\/\//, '');
  t.truthy(containerId);
  await ctr(containerdLayout(node.dir), 'tasks', 'kill', '--signal', 'SIGKILL', containerId);
  const after = await waitFor(
    async () => {
      const p = await core.readNamespacedPod({ name: before.metadata?.name ?? '', namespace: NS });
      const s = p.status?.containerStatuses?.[0];
      return s && s.restartCount >= 1 && s.ready ? p : undefined;
    },
    { what: 'the killed container restarted and Ready', timeoutMs: 60_000 },
  );
  t.is(after.metadata?.uid, before.metadata?.uid, 'the same pod, its container restarted');
  const answer = await getJson(`http://${after.status?.podIP}:8080/`);
  t.is(answer.hostname, before.metadata?.name ?? '');
});

/** Live processes (zombies aside) by command name, as `ps -eo comm` shows them. */
function running(names: string[]): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && names.includes(comm)) found.push(`${comm}[${pid}]`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

const NODE_PROCESSES = ['kubelet', 'kube-proxy', 'containerd', 'containerd-shim', 'coredns', 'pause', 'test-app'];

test.serial('stop() leaves nothing of the node on the host', async (t) => {
  if (!node) return t.fail('no node');
  const duringRun = readSysctl('kernel.panic_on_oops');
  t.true(running(NODE_PROCESSES).length >= 6, running(NODE_PROCESSES).join(' '));
  await node.stop();
  t.deepEqual(node.leftovers(), []);
  t.deepEqual(running(NODE_PROCESSES), []);
  for (const s of WATCHED_SYSCTLS) t.is(readSysctl(s), sysctlsBefore[s], `sysctl ${s}`);
  t.deepEqual(iptablesChains('iptables', ['KUBE-', 'KPNODE-']), []);
  t.deepEqual(iptablesChains('ip6tables', ['KUBE-', 'KPNODE-']), []);
  say(
    `kernel.panic_on_oops: ${sysctlsBefore['kernel.panic_on_oops']} before, ${duringRun} while the node ran, ${readSysctl('kernel.panic_on_oops')} after stop`,
  );
  await t.throwsAsync(core.readNode({ name: node.name }));
});
