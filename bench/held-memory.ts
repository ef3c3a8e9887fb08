// The gate's memory while it holds many Revisions at once. The gate runs as its own process (the
// CLI, as in production), so /proc/<pid>/status shows its resident set alone: VmRSS (now) and
// VmHWM (peak since start). Read once after start with nothing held, then again once every
// Revision is held with its PrestartRun Running and the hook's request Requested (the hook
// answers 202 and never replies; timeout and resendInterval are an hour, so nothing moves).
// Each reading is followed by a full garbage collection inside the gate (bench/_heap-probe.mjs,
// loaded through NODE_OPTIONS, answers SIGUSR2), then V8's heap in use and VmRSS again: the
// memory the gate retains, apart from garbage it has not collected yet. Also prints the control
// plane's processes, for scale.
//
// By default the gate runs from source under tsx, whose loader alone adds ~85 MiB; for the figure
// a production gate shows, build first and pass the compiled CLI:
//
//   node --import tsx bench/held-memory.ts [--revisions 1000] [--concurrency 16] [--settle 10]
//   npm run build && node --import tsx bench/held-memory.ts --cli dist/cli/main.js
//   (or KNATIVE_PRESTART_GATE_CLI=$PWD/dist/cli/main.js, which spawnGate reads)
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { GATE_CLI_ENV, type GateProcess, spawnGate } from '@knative-prestart/devcluster/gate/process.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import {
  controlPlaneMemory,
  inBatches,
  load,
  memoryKiB,
  type ProcessMemory,
  reproduce,
  retryOnWebhookReset,
  table,
  webhookResets,
} from './_common.ts';

const HEAP_PROBE = fileURLToPath(new URL('./_heap-probe.mjs', import.meta.url));
const HEAP_FILE = join(tmpdir(), `held-memory-${process.pid}.json`);

const { values: args } = parseArgs({
  options: {
    revisions: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '16' },
    settle: { type: 'string', default: '10' },
    cli: { type: 'string' },
  },
});
const REVISIONS = Number(args.revisions);
const CONCURRENCY = Number(args.concurrency);
const SETTLE_S = Number(args.settle);

const resetNote = () => (webhookResets.count > 0 ? `; ${webhookResets.count} creates retried after a webhook connection reset` : '');
const mib = (kib: number) => (kib / 1024).toFixed(1);
const secondsSince = (t: number) => `${((performance.now() - t) / 1000).toFixed(1)} s`;
const pause = (s: number) => new Promise((resolve) => setTimeout(resolve, s * 1000));

// --cli, or the variable spawnGate reads (so `npm run bench:gate` can pass it through).
const compiledCli = args.cli ?? process.env[GATE_CLI_ENV];
if (compiledCli) {
  const cli = resolve(compiledCli);
  if (!existsSync(cli)) throw new Error(`${compiledCli}: no such file (npm run build makes dist/cli/main.js)`);
  process.env[GATE_CLI_ENV] = cli;
}
// Inherited by the gate process only: this process spawns nothing else with node.
process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import ${HEAP_PROBE}`.trim();
process.env.BENCH_HEAP_FILE = HEAP_FILE;
console.log(`held-memory: ${load()} at start`);
// What this bench simplifies, printed with its figures (bench/scale.ts weighs the real shape at scale).
console.log(
  "simplified: the harness's minimal Revisions (3 labels, one image, no status: ~4x lighter than Knative's), all in one namespace and one Configuration, no released runs beside them; bench/scale.ts holds Knative-shaped ones among 10,000",
);
console.log(
  `gate: ${compiledCli ? `compiled CLI ${compiledCli}` : 'cli/main.ts under tsx (its loader adds ~85 MiB; --cli dist/cli/main.js for the compiled gate)'}`,
);
const t0 = performance.now();
const env = await gateEnv(`bench-mem-${randomBytes(2).toString('hex')}`, { inProcess: false });
const hookName = `${env.instance}-db`;
let requested = 0;
const hook = await startHookServer(async (req) => {
  if (req.data.action === 'start') requested++;
  return { status: 202 };
});
const [webhookPort, sinkPort] = await freePorts(2);
let gate: GateProcess | undefined;
const names = Array.from({ length: REVISIONS }, (_, i) => `held-${String(i + 1).padStart(5, '0')}`);

interface AfterGc {
  /** V8 heap in use after a full collection, KiB. */
  heapUsed: number;
  /** VmRSS after it, KiB. */
  rss: number;
}

/** Asks the gate's heap probe for a full collection; its heap in use and resident set after it. */
async function afterGc(pid: number): Promise<AfterGc> {
  rmSync(HEAP_FILE, { force: true });
  process.kill(pid, 'SIGUSR2');
  const usage = await waitFor(() => existsSync(HEAP_FILE) && (JSON.parse(readFileSync(HEAP_FILE, 'utf8')) as NodeJS.MemoryUsage), {
    timeoutMs: 30_000,
    what: "the gate's heap probe to answer",
  });
  rmSync(HEAP_FILE, { force: true });
  return { heapUsed: usage.heapUsed / 1024, rss: memoryKiB(pid).rss };
}

/** Counts the namespace's PrestartRuns that hold their Revision with the request sent. */
async function heldRuns(): Promise<number> {
  const list = (await env.custom.listNamespacedCustomObject({
    group: 'prestart.dev',
    version: 'v1alpha1',
    plural: 'prestartruns',
    namespace: env.namespace,
  })) as { items: { status?: { phase?: string; hooks?: { phase: string }[] } }[] };
  return list.items.filter((r) => r.status?.phase === 'Running' && r.status.hooks?.[0]?.phase === 'Requested').length;
}

try {
  await env.createHook(hookName, {
    match: env.annotationMatch('bench'),
    timeout: '1h',
    resendInterval: '1h',
    delivery: { transport: 'http', url: hook.url },
  });
  gate = await spawnGate(env, { webhook: webhookPort as number, sink: sinkPort as number });
  const pid = gate.child.pid as number;
  await env.waitUntilStamped(hookName, { bench: 'yes' });
  await pause(SETTLE_S);
  const before = memoryKiB(pid);
  const beforeGc = await afterGc(pid);
  console.log(`gate pid ${pid} up and stamping after ${secondsSince(t0)}; idle ${SETTLE_S} s; ${load()}`);

  const t1 = performance.now();
  await inBatches(names.length, CONCURRENCY, async (i) => {
    await retryOnWebhookReset(() => env.createRevision(names[i] as string, { annotations: { bench: 'yes' } }));
  });
  const createdIn = secondsSince(t1);
  await waitFor(async () => (await heldRuns()) === REVISIONS, {
    timeoutMs: 240_000,
    intervalMs: 1000,
    what: `${REVISIONS} PrestartRuns Running with their request sent`,
    bail: () => (gate?.child.exitCode !== null ? new Error(`the gate exited:\n${gate?.output()}`) : undefined),
  });
  const heldIn = secondsSince(t1);
  const atHeld = memoryKiB(pid);
  await pause(SETTLE_S);
  const settled = memoryKiB(pid);
  const settledGc = await afterGc(pid);
  const loadHeld = load();

  console.log(
    `\n${REVISIONS} Revisions created in ${createdIn} (${CONCURRENCY} at a time), all held and Requested after ${heldIn}; hook got ${requested} requests${resetNote()}`,
  );
  const row = (what: string, m: ProcessMemory, gc?: AfterGc) => [
    what,
    mib(m.rss),
    mib(m.hwm),
    gc ? mib(gc.heapUsed) : '-',
    gc ? mib(gc.rss) : '-',
  ];
  const per = (now: number, then: number) => ((now - then) / REVISIONS).toFixed(1);
  table([
    ['gate process', 'VmRSS MiB', 'VmHWM MiB', 'heap after GC MiB', 'VmRSS after GC MiB'],
    row('0 Revisions held (after start)', before, beforeGc),
    row(`${REVISIONS} held (as the last became Running)`, atHeld),
    row(`${REVISIONS} held, ${SETTLE_S} s later`, settled, settledGc),
  ]);
  console.log(
    `  per held Revision: VmRSS +${per(atHeld.rss, before.rss)} KiB (at once), +${per(settled.rss, before.rss)} KiB (${SETTLE_S} s later); ` +
      `VmHWM +${per(atHeld.hwm, before.hwm)} KiB; heap after GC +${per(settledGc.heapUsed, beforeGc.heapUsed)} KiB; ` +
      `VmRSS after GC +${per(settledGc.rss, beforeGc.rss)} KiB`,
  );
  console.log(`  ${loadHeld}`);
  const cp = controlPlaneMemory(env.cluster.dir);
  if (cp.length > 0) {
    console.log('\ncontrol plane, for scale (same moment):');
    table([['process', 'VmRSS MiB', 'VmHWM MiB'], ...cp.map((c) => [c.name, mib(c.memory.rss), mib(c.memory.hwm)])]);
  }
  console.log(`\ntotal ${secondsSince(t0)}`);
  reproduce('bench/held-memory.ts');
} finally {
  await gate?.stop();
  // Held Revisions carry the gate's cancel finalizer; with the gate gone, the admin lifts it so
  // the namespace can go.
  const custom = env.admin.makeApiClient(CustomObjectsApi);
  await inBatches(names.length, CONCURRENCY, async (i) => {
    await custom
      .patchNamespacedCustomObject(
        {
          group: 'serving.knative.dev',
          version: 'v1',
          plural: 'revisions',
          namespace: env.namespace,
          name: names[i] as string,
          body: { metadata: { finalizers: null } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch(() => undefined);
  });
  await hook.close();
  await env.stop();
  await env.cluster.stop();
}
process.exit(0);
