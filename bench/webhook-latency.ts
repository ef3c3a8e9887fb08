// Latency of the gate's Revision webhook (/webhooks/revisions), which sits in the path of every
// Revision create in a gated namespace:
//   (a) direct: AdmissionReview POSTs of a Knative-shaped Revision (two matching hooks in the
//       gate's cache, three that do not match) over one HTTPS keep-alive connection, against a
//       bare Node https server on 127.0.0.1 with the same key type (ECDSA P-256) that parses the
//       review and answers `allowed: true`, and against the same echo behind express and
//       express.json() (the gate's framework). All run in this process, one request at a time,
//       interleaved in rounds so they share the machine's noise.
//   (b) through the apiserver: dry-run creates of the same Revision in the gated namespace
//       (the apiserver calls the webhook and applies its patch) against a namespace the webhook
//       does not select (no call): the cost a user sees on every Revision create. A third
//       namespace is selected by a webhook configuration pointing at the bare echo server, which
//       splits that cost into the apiserver's webhook call itself and what the gate adds to it.
//
//   node --import tsx bench/webhook-latency.ts [--requests 2000] [--warmup 300] [--round 100]
//        [--through 500]
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import { parseArgs } from 'node:util';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HttpsTestServer, startHttpsServer } from '@knative-prestart/devcluster/https-server.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import express from 'express';
import { webhookConfigurationName } from '../gate/webhooks/tls.ts';
import { load, ms, reproduce, retryOnWebhookReset, type Summary, summarize, table, webhookResets } from './_common.ts';
import { admissionReview, knativeRevision } from './_revision.ts';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '300' },
    round: { type: 'string', default: '100' },
    through: { type: 'string', default: '500' },
  },
});
const REQUESTS = Number(args.requests);
const WARMUP = Number(args.warmup);
const ROUND = Number(args.round);
const THROUGH = Number(args.through);
const BINDING = { 'serving-binding': 'orders-db' };

interface Target {
  name: string;
  port: number;
  agent: https.Agent;
  times: number[];
}

/** One POST of an AdmissionReview; resolves with the milliseconds to the end of the answer. */
function review(target: Target, body: string, check: (answer: string) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = https.request(
      {
        host: '127.0.0.1',
        port: target.port,
        path: '/webhooks/revisions',
        method: 'POST',
        agent: target.agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const elapsed = performance.now() - started;
          try {
            if (res.statusCode !== 200) throw new Error(`${target.name} answered ${res.statusCode}`);
            check(Buffer.concat(chunks).toString('utf8'));
            resolve(elapsed);
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function runMany(target: Target, count: number, namespace: string, check: (answer: string) => void, record: boolean) {
  const revision = knativeRevision(namespace, 'checkout-00042', BINDING);
  for (let i = 0; i < count; i++) {
    // A fresh uid per review, serialised before the clock starts.
    const t = await review(target, admissionReview(revision, namespace), check);
    if (record) target.times.push(t);
  }
}

let echoCalls = 0;

/** A bare webhook: reads the review, answers allowed with its uid. */
async function startEcho() {
  return startHttpsServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      echoCalls++;
      const { request } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: { uid: string } };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: request.uid, allowed: true } }),
      );
    });
  });
}

async function gateCaBundle(env: GateEnv): Promise<string> {
  const api = env.admin.makeApiClient(AdmissionregistrationV1Api);
  const config = await api.readMutatingWebhookConfiguration({ name: webhookConfigurationName(env.instance) });
  const bundle = config.webhooks?.[0]?.clientConfig.caBundle;
  if (!bundle) throw new Error(`webhook configuration of ${env.instance} has no caBundle`);
  return Buffer.from(bundle, 'base64').toString('utf8');
}

/** The same answer through express and express.json(), as the gate's router parses reviews. */
function startExpressEcho(): Promise<HttpsTestServer> {
  const app = express();
  app.use(express.json({ limit: 3 * 1024 * 1024 }));
  app.post('/webhooks/revisions', (req, res) => {
    const { request } = req.body as { request: { uid: string } };
    res.json({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: request.uid, allowed: true } });
  });
  return startHttpsServer(app);
}

interface Direct {
  bare: Summary;
  express: Summary;
  gate: Summary;
}

async function direct(env: GateEnv, echo: HttpsTestServer): Promise<Direct> {
  const expressEcho = await startExpressEcho();
  const target = (name: string, port: number, ca: string): Target => ({
    name,
    port,
    agent: new https.Agent({ keepAlive: true, maxSockets: 1, ca }),
    times: [],
  });
  const gate = target('gate', Number(new URL(env.gate.webhookUrl).port), await gateCaBundle(env));
  const bare = target('bare', echo.port, echo.caCertPem);
  const viaExpress = target('express', expressEcho.port, expressEcho.caCertPem);
  const targets = [gate, bare, viaExpress];
  const stamped = (answer: string) => {
    const response = (JSON.parse(answer) as { response: { allowed: boolean; patch?: string } }).response;
    if (!response.allowed || !response.patch) throw new Error(`the gate did not stamp the Revision: ${answer}`);
    const patch = Buffer.from(response.patch, 'base64').toString('utf8');
    if (!patch.includes('prestart.dev~1hold')) throw new Error(`the gate's patch holds nothing: ${patch}`);
  };
  const allowed = (answer: string) => {
    if (!(JSON.parse(answer) as { response: { allowed: boolean } }).response.allowed) throw new Error(`echo denied: ${answer}`);
  };
  const check = (t: Target) => (t === gate ? stamped : allowed);
  try {
    for (const t of targets) await runMany(t, WARMUP, env.namespace, check(t), false);
    for (let done = 0, round = 0; done < REQUESTS; done += ROUND, round++) {
      const n = Math.min(ROUND, REQUESTS - done);
      // Rotate which goes first, so none always runs right after a pause or right after another.
      for (let j = 0; j < targets.length; j++) {
        const t = targets[(round + j) % targets.length] as Target;
        await runMany(t, n, env.namespace, check(t), true);
      }
    }
    return { gate: summarize(gate.times), bare: summarize(bare.times), express: summarize(viaExpress.times) };
  } finally {
    for (const t of targets) t.agent.destroy();
    await expressEcho.close();
  }
}

/** Registers the echo server as a mutating webhook for Revisions in namespaces labelled for it. */
async function registerEcho(env: GateEnv, echo: HttpsTestServer, name: string, namespace: string): Promise<void> {
  const api = env.admin.makeApiClient(AdmissionregistrationV1Api);
  await api.createMutatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: [
        {
          name: 'echo.bench.prestart.dev',
          clientConfig: { url: `${echo.url}/webhooks/revisions`, caBundle: echo.caBundle },
          rules: [
            {
              apiGroups: ['serving.knative.dev'],
              apiVersions: ['v1'],
              operations: ['CREATE'],
              resources: ['revisions'],
              scope: 'Namespaced',
            },
          ],
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          matchPolicy: 'Equivalent',
          reinvocationPolicy: 'Never',
          timeoutSeconds: 5,
        },
      ],
    },
  });
}

interface Through {
  plain: Summary;
  echo: Summary;
  gated: Summary;
}

async function throughApiserver(env: GateEnv, echo: HttpsTestServer): Promise<Through> {
  const plainNs = `${env.instance}-plain`;
  const echoNs = `${env.instance}-echo`;
  const echoConfig = `${env.instance}-echo`;
  await env.core.createNamespace({ body: { metadata: { name: plainNs } } });
  await env.core.createNamespace({ body: { metadata: { name: echoNs } } });
  try {
    await registerEcho(env, echo, echoConfig, echoNs);
    const create = async (namespace: string): Promise<number> => {
      const body = knativeRevision(namespace, 'checkout-00042', BINDING);
      const started = performance.now();
      await retryOnWebhookReset(() =>
        env.custom.createNamespacedCustomObject({
          group: 'serving.knative.dev',
          version: 'v1',
          plural: 'revisions',
          namespace,
          dryRun: 'All',
          body,
        }),
      );
      return performance.now() - started;
    };
    // Webhook configurations take effect a moment after they are written.
    await waitFor(
      async () => {
        const before = echoCalls;
        await create(echoNs);
        return echoCalls > before;
      },
      { what: 'the apiserver to call the echo webhook' },
    );
    const times: Record<keyof Through, number[]> = { plain: [], echo: [], gated: [] };
    const namespaces: Record<keyof Through, string> = { plain: plainNs, echo: echoNs, gated: env.namespace };
    const kinds = Object.keys(times) as (keyof Through)[];
    for (let i = 0; i < Math.min(30, THROUGH); i++) for (const k of kinds) await create(namespaces[k]);
    for (let i = 0; i < THROUGH; i++) {
      // Rotate which goes first, so none always follows the same neighbour.
      for (let j = 0; j < kinds.length; j++) {
        const k = kinds[(i + j) % kinds.length] as keyof Through;
        times[k].push(await create(namespaces[k]));
      }
    }
    return { plain: summarize(times.plain), echo: summarize(times.echo), gated: summarize(times.gated) };
  } finally {
    await env.admin
      .makeApiClient(AdmissionregistrationV1Api)
      .deleteMutatingWebhookConfiguration({ name: echoConfig })
      .catch(() => undefined);
    await env.core.deleteNamespace({ name: plainNs }).catch(() => undefined);
    await env.core.deleteNamespace({ name: echoNs }).catch(() => undefined);
  }
}

process.env.GATE_LOG_LEVEL ??= 'error';
console.log(`webhook-latency: ${load()} at start`);
const t0 = performance.now();
const env = await gateEnv(`bench-wh-${randomBytes(2).toString('hex')}`);
const own = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } } };
const hooks = [
  // Matches every Revision of the namespace.
  { name: `${env.instance}-audit`, match: own },
  { name: `${env.instance}-db`, match: { ...own, annotation: { key: 'serving-binding', value: 'orders-db' } } },
  // Three that the webhook evaluates and skips.
  { name: `${env.instance}-cache`, match: { ...own, annotation: { key: 'serving-binding', value: 'cache' } } },
  { name: `${env.instance}-other-ns`, match: { namespaceSelector: { matchLabels: { team: 'nobody' } } } },
  { name: `${env.instance}-canary`, match: { ...own, revisionSelector: { matchLabels: { track: 'canary' } } } },
];
const echo = await startEcho();
try {
  for (const h of hooks) {
    await env.createHook(h.name, { match: h.match, delivery: { transport: 'http', url: 'http://127.0.0.1:9/' } });
  }
  for (const h of hooks.slice(0, 2)) await env.waitUntilStamped(h.name, BINDING);
  console.log(`setup ${((performance.now() - t0) / 1000).toFixed(1)} s; ${load()}`);

  const a = await direct(env, echo);
  const loadA = load();
  console.log(
    `\n(a) direct: ${REQUESTS} AdmissionReviews each after ${WARMUP} warm-up, one at a time over HTTPS keep-alive, rounds of ${ROUND} in rotation`,
  );
  table([
    ['target', 'n', 'p50 ms', 'p99 ms'],
    ['bare https echo (JSON.parse, allowed: true)', String(a.bare.n), ms(a.bare.p50), ms(a.bare.p99)],
    ['express + express.json() echo', String(a.express.n), ms(a.express.p50), ms(a.express.p99)],
    ['gate /webhooks/revisions (stamps)', String(a.gate.n), ms(a.gate.p50), ms(a.gate.p99)],
    ['gate - bare', '', ms(a.gate.p50 - a.bare.p50), ms(a.gate.p99 - a.bare.p99)],
    ['  of which express (express - bare)', '', ms(a.express.p50 - a.bare.p50), ms(a.express.p99 - a.bare.p99)],
    ['gate / bare', '', (a.gate.p50 / a.bare.p50).toFixed(2), (a.gate.p99 / a.bare.p99).toFixed(2)],
  ]);
  console.log(`  ${loadA}`);

  const b = await throughApiserver(env, echo);
  console.log(`\n(b) through the apiserver: ${THROUGH} dry-run Revision creates per namespace, in rotation`);
  table([
    ['namespace', 'n', 'p50 ms', 'p99 ms'],
    ['not selected (no webhook call)', String(b.plain.n), ms(b.plain.p50), ms(b.plain.p99)],
    ['selected by the bare echo webhook', String(b.echo.n), ms(b.echo.p50), ms(b.echo.p99)],
    ['gated (webhook stamps the hold)', String(b.gated.n), ms(b.gated.p50), ms(b.gated.p99)],
    ['gated - not selected (user-visible cost)', '', ms(b.gated.p50 - b.plain.p50), ms(b.gated.p99 - b.plain.p99)],
    ['echo - not selected (any webhook call)', '', ms(b.echo.p50 - b.plain.p50), ms(b.echo.p99 - b.plain.p99)],
    ['gated - echo (what the gate adds)', '', ms(b.gated.p50 - b.echo.p50), ms(b.gated.p99 - b.echo.p99)],
    ['gated / not selected', '', (b.gated.p50 / b.plain.p50).toFixed(2), (b.gated.p99 / b.plain.p99).toFixed(2)],
  ]);
  if (webhookResets.count > 0) console.log(`  ${webhookResets.count} creates retried after a webhook connection reset (time included)`);
  console.log(`  ${load()}`);
  console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  reproduce('bench/webhook-latency.ts');
} finally {
  await echo.close();
  await env.stop();
  await env.cluster.stop();
}
process.exit(0);
