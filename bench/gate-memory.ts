// Where the gate's memory goes, and what the settings of its Deployment do to it (issue 14).
// Two parts, each printed as ratios against a baseline measured in the same run:
//
//   1. The floor (no control plane): a Node process that imports what `knative-prestart gate`
//      loads before it serves (the compiled cli/main.js and gate/gate.js), vs a bare Node process;
//      V8 heap in use after a full GC, and VmRSS, under each variant compared. Then what each
//      part the gate loads only when configured would add (NATS, the OpenTelemetry SDK,
//      @peculiar/x509, the other commands of the CLI). Each process runs max(3, --rounds) times,
//      interleaved; medians.
//   2. The gate among Knative-shaped objects (bench/_knative.ts: released Revisions with status
//      and their released PrestartRuns, a Configuration and a Route per Service, the newest
//      generation of every Service held by a hook that accepts and never replies, resendInterval
//      30 s): the compiled gate is started in turns under each variant, lists everything, re-sends
//      every held request at once (a new term), then runs --settle seconds (resending every 30 s).
//      VmRSS steady (the mean of the settle's last minute: with Node's defaults it still grows for
//      minutes), VmRSS at most during the settle, VmHWM since spawn, V8 heap in use and VmRSS
//      after a full GC (bench/_heap-probe.mjs), the CPU time the gate used from spawn to the end
//      of the settle, and the time from spawn to every request re-sent; each vs the first
//      variant, medians over --rounds.
//
// A variant is Node options and environment variables in one string: NAME=value words are the
// environment (cli=PATH: another compiled CLI, e.g. a build of an earlier commit; as=NAME: the
// variant's name in the output), the rest Node options. By default three: Node's defaults on a
// machine without a memory limit (V8 then sizes the heap from all of its memory); the Node options
// of config/500-gate.yaml alone (what Node 20 derives from the Deployment's 512Mi limit, pinned
// there); and the gate container's whole environment there (with the allocator's settings): the
// gate as installed.
//
// Stubbed or left out: no pods (the gate watches none; bench/scale.ts adds 50,000 for the
// apiserver's sake), no admission traffic once the held Revisions exist, no replies (runs stay
// Requested). The gate runs at info level, as installed.
//
//   npm run build && node --import tsx bench/gate-memory.ts [--cli dist/cli/main.js]
//     [--namespaces 100] [--services 10] [--generations 10] [--hooks 20] [--settle 300] [--rounds 1]
//     [--variant='NODE_ENV=production' --variant='MALLOC_ARENA_MAX=2 --max-semi-space-size=1' ...]
//     [--floor-only]
//
// Revisions = namespaces x services x generations (default 10,000, as bench/scale.ts; ~15 min in all).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { BulkError, bulkWriter, inParallel } from '@knative-prestart/devcluster/bulk.ts';
import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import type { KubernetesObject } from '@kubernetes/client-node';
import { HOLD_LABEL } from '../api/types.ts';
import { load, memoryKiB, table } from './_common.ts';
import { apiPath, deploymentEnv, revisionOf, revisionStatus, SERVING, writeReleasedRevision, writeService } from './_knative.ts';
import { afterGc, heapFileFor, type ScaleGate, scaleHook, spawnScaleGate } from './_scale-support.ts';

const { values: a } = parseArgs({
  options: {
    cli: { type: 'string', default: 'dist/cli/main.js' },
    namespaces: { type: 'string', default: '100' },
    services: { type: 'string', default: '10' },
    generations: { type: 'string', default: '10' },
    hooks: { type: 'string', default: '20' },
    settle: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '1' },
    variant: { type: 'string', multiple: true },
    'floor-only': { type: 'boolean', default: false },
  },
});
const N = {
  namespaces: Number(a.namespaces),
  services: Number(a.services),
  generations: Number(a.generations),
  hooks: Number(a.hooks),
  settleS: Number(a.settle),
  rounds: Number(a.rounds),
};
const cli = resolve(a.cli as string);
if (!existsSync(cli)) throw new Error(`${a.cli}: no such file (npm run build makes dist/cli/main.js)`);
const deployed = deploymentEnv();
const installed = Object.entries(deployed)
  .map(([name, value]) => (name === 'NODE_OPTIONS' ? value : `${name}=${value}`))
  .join(' ');
const variants = a.variant ?? [
  'as=node-defaults NODE_ENV=production',
  `as=node-options-only NODE_ENV=production ${deployed.NODE_OPTIONS ?? ''}`,
  `as=config/500-gate.yaml ${installed}`,
];
/** A variant's name: its as=NAME word, else the variant itself. */
const label = (variant: string) =>
  variant
    .split(/\s+/)
    .find((w) => w.startsWith('as='))
    ?.slice(3) ||
  variant ||
  "Node's defaults";
/** A variant's compiled CLI (cli=PATH, default --cli), Node options and environment (NAME=value words). */
function parsed(variant: string): { cli: string; nodeOptions: string; env: Record<string, string> } {
  const words = variant.split(/\s+/).filter(Boolean);
  const other = words.find((w) => w.startsWith('cli='));
  const ours = (w: string) => w.startsWith('cli=') || w.startsWith('as=');
  const isEnv = (w: string) => !ours(w) && /^[A-Za-z_][A-Za-z0-9_]*=/.test(w);
  return {
    cli: other ? resolve(other.slice(4)) : cli,
    nodeOptions: words.filter((w) => !isEnv(w) && !ours(w)).join(' '),
    env: Object.fromEntries(words.filter(isEnv).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)])),
  };
}
const mib = (kib: number) => (kib / 1024).toFixed(1);
const ratio = (v: number, base: number) => `${(v / base).toFixed(2)}x`;
const median = (values: number[]) => {
  const s = [...values].sort((x, y) => x - y);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** User and system CPU time of a process so far (proc(5): utime and stime, in clock ticks of 1/100 s). */
const cpuSeconds = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const T0 = performance.now();
const say = (line: string) => console.log(`[${((performance.now() - T0) / 1000).toFixed(0).padStart(4)} s] ${line}`);

console.log(`gate-memory: ${load()}; compiled gate ${cli}; Node ${process.version}`);
console.log(`variants compared: ${variants.map((v) => `"${label(v)}"`).join(', ')} (the first is the baseline)`);

// --- 1. the floor ---------------------------------------------------------------------------------

interface Loaded {
  rss: number;
  rssAfterGc: number;
  heapUsed: number;
  heapTotal: number;
}

const PROBE = fileURLToPath(new URL('./_load-probe.mjs', import.meta.url));
const run = promisify(execFile);
async function loaded(variant: string, modules: string[]): Promise<Loaded> {
  const { cli: variantCli, nodeOptions, env } = parsed(variant);
  const dist = dirname(dirname(variantCli));
  const args = [...nodeOptions.split(' ').filter(Boolean), '--expose-gc', PROBE, ...modules.map((m) => m.replace(DIST, dist))];
  const { stdout } = await run(process.execPath, args, { cwd: dist, env: { ...process.env, ...env, NODE_OPTIONS: '' } });
  return JSON.parse(stdout.trim().split('\n').pop() as string) as Loaded;
}

/** Stands for the variant's compiled tree in module paths. */
const DIST = '<dist>';
const inDist = (...paths: string[]) => paths.map((p) => `${DIST}/${p}`);
const fromModules = (specifier: string) => join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', specifier);
const sets: { name: string; modules: string[] }[] = [
  { name: 'bare Node (a timer)', modules: [] },
  { name: 'what `gate` loads (cli/main, gate/gate)', modules: inDist('cli/main.js', 'gate/gate.js') },
];
const extras: { name: string; modules: string[] }[] = [
  { name: 'NATS transport and sink (--nats)', modules: inDist('emitter/nats.js', 'sinks/nats.js') },
  { name: 'OpenTelemetry SDK (OTLP endpoint set)', modules: inDist('gate/telemetry/tracing-otel.js') },
  {
    name: '@peculiar/x509 (a certificate made)',
    modules: [fromModules('reflect-metadata/Reflect.js'), fromModules('@peculiar/x509/build/x509.es.js')],
  },
  {
    name: 'the other commands of the CLI',
    modules: inDist('triggers/cli.js', 'hooks/cli.js', 'cli/uninstall.js', 'cli/prestart/commands.js'),
  },
];

const floor = new Map<string, Loaded[]>();
const key = (variant: string, set: string) => `${variant}\u0000${set}`;
const base = variants[0] as string;
// The lazily loaded parts are weighed in the --cli tree, under the first variant that runs it.
const extrasIn = variants.find((v) => parsed(v).cli === cli);
for (let round = 0; round < Math.max(3, N.rounds); round++) {
  for (const variant of variants) {
    const withExtras =
      variant === extrasIn ? extras.map((e) => ({ name: e.name, modules: [...(sets[1]?.modules ?? []), ...e.modules] })) : [];
    for (const set of [...sets, ...withExtras]) {
      const k = key(variant, set.name);
      floor.set(k, [...(floor.get(k) ?? []), await loaded(variant, set.modules)]);
    }
  }
}
const med = (variant: string, set: string, field: keyof Loaded) => median((floor.get(key(variant, set)) ?? []).map((l) => l[field]));
say(`1. the floor: ${Math.max(3, N.rounds)} processes per row, medians (MiB)`);
const bare = sets[0]?.name as string;
const gateSet = sets[1]?.name as string;
const floorRows: string[][] = [
  ['variant / modules', 'heap in use', 'VmRSS', 'VmRSS after GC', 'VmRSS vs bare Node', `VmRSS vs "${label(base)}"`],
];
for (const variant of variants) {
  for (const set of [bare, gateSet]) {
    const rss = med(variant, set, 'rss');
    floorRows.push([
      `${label(variant)}: ${set}`,
      mib(med(variant, set, 'heapUsed')),
      mib(rss),
      mib(med(variant, set, 'rssAfterGc')),
      ratio(rss, med(variant, bare, 'rss')),
      ratio(rss, med(base, set, 'rss')),
    ]);
  }
}
table(floorRows);
if (extrasIn !== undefined) {
  console.log(`  loaded only when configured, added to what \`gate\` loads ("${label(extrasIn)}"; heap in use is the steadier figure):`);
  table([
    ['module', 'heap in use +MiB', 'VmRSS +MiB'],
    ...extras.map((e) => [
      e.name,
      ((med(extrasIn, e.name, 'heapUsed') - med(extrasIn, gateSet, 'heapUsed')) / 1024).toFixed(1),
      ((med(extrasIn, e.name, 'rss') - med(extrasIn, gateSet, 'rss')) / 1024).toFixed(1),
    ]),
  ]);
}

if (a['floor-only']) process.exit(0);

// --- 2. the gate among Knative-shaped objects -------------------------------------------------------

const WRITERS = 32;
const RESEND_S = 30;
const pad = (n: number, w = 2) => String(n).padStart(w, '0');
const env = await gateEnv(`gmem-${randomBytes(2).toString('hex')}`, { inProcess: false });
const writer = await bulkWriter(env.admin, WRITERS);
const instance = env.instance;
const namespaces = Array.from({ length: N.namespaces }, (_, i) => `${instance}-${pad(i)}`);
const services = Array.from({ length: N.services }, (_, s) => `svc-${pad(s)}`);
const hookNames = Array.from({ length: N.hooks }, (_, h) => `${instance}-h${pad(h)}`);
const HOOK_KEY = 'bench.prestart.dev/hook';
const accepting = await scaleHook(() => ({ status: 202 }));
const heldKeys: string[] = [];
let gate: ScaleGate | undefined;

async function cleanup(): Promise<void> {
  await gate?.process.stop().catch(() => undefined);
  await inParallel(heldKeys.length, WRITERS, async (i) => {
    const [ns, name] = (heldKeys[i] as string).split('/');
    await writer
      .send('PATCH', apiPath(SERVING, ns as string, 'revisions', name), { metadata: { finalizers: null } }, 'application/merge-patch+json')
      .catch(() => undefined);
  });
  for (const ns of namespaces) await env.core.deleteNamespace({ name: ns }).catch(() => undefined);
  await accepting.close();
  writer.close();
  await env.stop();
  await env.cluster.stop();
}

try {
  for (const ns of namespaces) {
    await env.core.createNamespace({ body: { metadata: { name: ns, labels: { 'prestart.dev/gate': instance } } } });
  }
  for (const name of hookNames) {
    await env.createHook(name, {
      match: { annotation: { key: HOOK_KEY, value: name }, namespaceSelector: { matchLabels: { 'prestart.dev/gate': instance } } },
      timeout: '1h',
      resendInterval: `${RESEND_S}s`,
      delivery: { transport: 'http', url: accepting.url },
      params: { database: 'orders', migrate: true },
      contributions: { allowed: ['env', 'volume'] },
    });
  }
  const now = new Date().toISOString();
  const configurationUID = new Map<string, string>();
  const tSetup = performance.now();
  await inParallel(N.namespaces * N.services, WRITERS, async (i) => {
    const ns = namespaces[Math.floor(i / N.services)] as string;
    const svc = services[i % N.services] as string;
    configurationUID.set(`${ns}/${svc}`, await writeService(writer, ns, svc, `${svc}-${pad(N.generations, 5)}`, now));
  });
  const hookOf = (nsIndex: number, s: number) => hookNames[(nsIndex * N.services + s) % N.hooks] as string;
  const old = N.namespaces * N.services * (N.generations - 1);
  await inParallel(
    old,
    WRITERS,
    async (i) => {
      const nsIndex = Math.floor(i / (N.services * (N.generations - 1)));
      const s = Math.floor(i / (N.generations - 1)) % N.services;
      const ns = namespaces[nsIndex] as string;
      const svc = services[s] as string;
      const rev = revisionOf(ns, svc, (i % (N.generations - 1)) + 1, configurationUID.get(`${ns}/${svc}`));
      await writeReleasedRevision(writer, ns, rev, hookOf(nsIndex, s), accepting.url, now);
    },
    (done) => done % 2000 === 0 && say(`  ${done} released Revisions with their runs`),
  );
  say(
    `${old} released Revisions with their released runs, ${N.namespaces * N.services} Configurations and Routes, in ${((performance.now() - tSetup) / 1000).toFixed(0)} s`,
  );

  const [webhookPort, sinkPort] = (await freePorts(2)) as [number, number];
  const heapFile = heapFileFor('gate-memory');
  const start = (variant: string) => {
    const { cli: variantCli, nodeOptions, env: variantEnv } = parsed(variant);
    return spawnScaleGate(variantCli, {
      kubeconfig: env.gateKubeconfigPath,
      instance,
      webhook: webhookPort,
      sink: sinkPort,
      heapFile,
      nodeOptions,
      env: variantEnv,
    });
  };

  // The held Revisions, through the gate's webhook (stamped and held), under the baseline variant; not measured.
  gate = await start(base);
  await env.waitUntilStamped(hookNames[0] as string, { [HOOK_KEY]: hookNames[0] as string });
  await inParallel(N.namespaces * N.services, 16, async (i) => {
    const nsIndex = Math.floor(i / N.services);
    const ns = namespaces[nsIndex] as string;
    const svc = services[i % N.services] as string;
    const rev = revisionOf(ns, svc, N.generations, configurationUID.get(`${ns}/${svc}`), { [HOOK_KEY]: hookOf(nsIndex, i % N.services) });
    heldKeys.push(`${ns}/${rev.metadata.name}`);
    const created = (await writer.send('POST', `${apiPath(SERVING, ns, 'revisions')}?fieldManager=controller`, rev)) as KubernetesObject;
    if (created.metadata?.labels?.[HOLD_LABEL] !== 'true') throw new Error(`${ns}/${rev.metadata.name} was admitted without the hold`);
    await writer
      .send(
        'PATCH',
        `${apiPath(SERVING, ns, 'revisions', rev.metadata.name)}/status?fieldManager=controller`,
        { status: revisionStatus(false, now) },
        'application/merge-patch+json',
      )
      .catch((err: unknown) => {
        if (!(err instanceof BulkError && err.status === 409)) throw err;
      });
  });
  const sentSince = (t: number) => heldKeys.filter((k) => (accepting.last.get(k)?.at ?? 0) >= t).length;
  await waitFor(() => sentSince(0) === heldKeys.length, {
    timeoutMs: 600_000,
    intervalMs: 500,
    what: `${heldKeys.length} held requests sent`,
  });
  await gate.process.stop();
  gate = undefined;
  say(
    `${heldKeys.length} Revisions held by ${N.hooks} hooks (requests sent, never answered); ${N.namespaces * N.services * N.generations} Revisions in all`,
  );

  interface Reading {
    startS: number;
    resentS: number;
    steadyRss: number;
    maxRss: number;
    hwm: number;
    heapUsed: number;
    rssAfterGc: number;
    cpuS: number;
  }
  const readings = new Map<string, Reading[]>();
  for (let round = 0; round < N.rounds; round++) {
    // Turns rotate so that no variant always runs first or last.
    const order = variants.map((_, i) => variants[(i + round) % variants.length] as string);
    for (const variant of order) {
      const spawned = Date.now();
      gate = await start(variant);
      const startS = (gate.readyAt - gate.spawnedAt) / 1000;
      await waitFor(() => sentSince(spawned) === heldKeys.length, {
        timeoutMs: 600_000,
        intervalMs: 250,
        what: `every held request re-sent by the gate under "${label(variant)}"`,
        bail: () =>
          gate?.process.child.exitCode !== null ? new Error(`the gate exited:\n${gate?.process.output().slice(-3000)}`) : undefined,
      });
      const resentS = (Date.now() - spawned) / 1000;
      const samples: number[] = [];
      for (let s = 0; s < N.settleS; s++) {
        await pause(1000);
        samples.push(memoryKiB(gate.pid).rss);
      }
      const lastMinute = samples.slice(-60);
      const hwm = memoryKiB(gate.pid).hwm;
      const cpuS = cpuSeconds(gate.pid);
      const gc = await afterGc(gate.pid, heapFile);
      const r: Reading = {
        startS,
        resentS,
        steadyRss: lastMinute.reduce((x, y) => x + y, 0) / lastMinute.length,
        maxRss: Math.max(...samples),
        hwm,
        heapUsed: gc.heapUsed,
        rssAfterGc: gc.rss,
        cpuS,
      };
      readings.set(variant, [...(readings.get(variant) ?? []), r]);
      say(
        `round ${round + 1}, "${label(variant)}": ready ${startS.toFixed(1)} s, all re-sent ${resentS.toFixed(1)} s after spawn; ` +
          `VmRSS ${mib(r.steadyRss)} MiB (mean of the last ${lastMinute.length} s), at most ${mib(r.maxRss)}, VmHWM ${mib(hwm)}, heap after GC ${mib(gc.heapUsed)}, VmRSS after GC ${mib(gc.rss)}, CPU ${cpuS.toFixed(1)} s; ${load()}`,
      );
      await gate.process.stop();
      gate = undefined;
    }
  }
  const m = (variant: string, f: keyof Reading) => median((readings.get(variant) ?? []).map((r) => r[f]));
  console.log(
    `\n2. the gate, ${N.namespaces * N.services * N.generations} Revisions (${heldKeys.length} held), medians of ${N.rounds} rounds, each vs "${label(base)}":`,
  );
  const fields: [keyof Reading, string, (v: number) => string][] = [
    ['steadyRss', `VmRSS, steady (mean of the settle's last minute) MiB`, mib],
    ['maxRss', `VmRSS at most during the ${N.settleS} s settle MiB`, mib],
    ['hwm', 'VmHWM since spawn MiB', mib],
    ['heapUsed', 'V8 heap in use after a full GC MiB', mib],
    ['rssAfterGc', 'VmRSS after a full GC MiB', mib],
    ['cpuS', 'CPU time, spawn to the end of the settle s', (v) => v.toFixed(1)],
    ['resentS', 'spawn -> every held request re-sent s', (v) => v.toFixed(1)],
  ];
  table([
    ['figure', ...variants.map((v) => `"${label(v)}"`)],
    ...fields.map(([f, name, fmt]) => [
      name,
      ...variants.map((v) => (v === base ? fmt(m(v, f)) : `${fmt(m(v, f))} (${ratio(m(v, f), m(base, f))})`)),
    ]),
  ]);
  console.log(`  ${load()}; total ${((performance.now() - T0) / 1000).toFixed(0)} s`);
} finally {
  await cleanup();
}
process.exit(0);
