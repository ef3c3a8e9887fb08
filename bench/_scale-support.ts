// Pieces of bench/scale.ts: hook services that answer as a bench needs at scale (keeping only the
// last request per Revision, not every body), a watch that follows a collection from "now" and
// tells when an object reaches a state, and the gate as a compiled process with its memory.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ReceivedRequest } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { GATE_CLI_ENV, type GateProcess, listenArgs, startGateProcess } from '@knative-prestart/devcluster/gate/process.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { type KubeConfig, type KubernetesObject, Watch } from '@kubernetes/client-node';
import { memoryKiB } from './_common.ts';

// --- hook services -------------------------------------------------------------------------

export interface SeenRequest {
  req: ReceivedRequest;
  /** Date.now() when it arrived. */
  at: number;
}

export interface ScaleHook {
  url: string;
  /** The last start request per "namespace/revision". */
  last: Map<string, SeenRequest>;
  /** Start requests received. */
  count: number;
  close(): Promise<void>;
}

type Answer = (req: ReceivedRequest) => { status: number; headers?: Record<string, string>; body?: string } | undefined;

/** A hook service; `answer` undefined leaves the request hanging (a hook that never answers). */
export async function scaleHook(answer: Answer): Promise<ScaleHook> {
  const last = new Map<string, SeenRequest>();
  const hook: ScaleHook = { url: '', last, count: 0, close: async () => undefined };
  const open = new Set<ServerResponse>();
  const server: Server = createServer((httpReq: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    httpReq.on('data', (c: Buffer) => chunks.push(c));
    httpReq.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const req: ReceivedRequest = {
        headers: httpReq.headers,
        body: '',
        ceId: String(httpReq.headers['ce-id'] ?? ''),
        data: JSON.parse(body || '{}'),
        correlationid: String(httpReq.headers['ce-correlationid'] ?? ''),
      };
      if (req.data.action === 'start') {
        hook.count++;
        const rev = req.data.revision as { namespace?: string; name: string };
        last.set(`${rev.namespace}/${rev.name}`, { req, at: Date.now() });
      }
      const a = answer(req);
      if (!a) {
        open.add(res);
        res.on('close', () => open.delete(res));
        return;
      }
      res.writeHead(a.status, a.headers ?? {});
      res.end(a.body ?? '');
    });
  });
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  hook.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  hook.close = () =>
    new Promise<void>((resolve) => {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return hook;
}

// --- following a collection ---------------------------------------------------------------

export interface Follower<T extends KubernetesObject> {
  /** Resolves with performance.now() of the first event (from now on) in which `until` holds for "namespace/name". */
  when(key: string, until: (obj: T) => boolean): Promise<number>;
  /** Calls `fn` with every event's object. */
  onEvent(fn: (obj: T) => void): void;
  stop(): void;
}

/** Watches `path` from now on (`currentVersion`), going on from the last version seen when the apiserver ends the watch. */
export async function follow<T extends KubernetesObject>(
  kc: KubeConfig,
  path: string,
  currentVersion: () => Promise<string>,
): Promise<Follower<T>> {
  const waiting = new Map<string, { until: (obj: T) => boolean; resolve: (at: number) => void }[]>();
  const listeners: ((obj: T) => void)[] = [];
  let rv = await currentVersion();
  let stopped = false;
  let current: AbortController | undefined;
  const start = async (): Promise<void> => {
    current = await new Watch(kc).watch(
      path,
      { resourceVersion: rv, allowWatchBookmarks: true },
      (type: string, obj: T) => {
        const at = performance.now();
        if (type === 'ERROR') {
          // 410 Gone (the CRD changed, or history was compacted): go on from now; what was missed is not measured.
          if ((obj as { code?: number }).code === 410) rv = '';
          return;
        }
        if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        for (const fn of listeners) fn(obj);
        const key = `${obj.metadata?.namespace}/${obj.metadata?.name}`;
        const list = waiting.get(key);
        if (!list) return;
        const left = list.filter((w) => {
          if (!w.until(obj)) return true;
          w.resolve(at);
          return false;
        });
        if (left.length > 0) waiting.set(key, left);
        else waiting.delete(key);
      },
      (err: unknown) => {
        if (stopped) return;
        // The apiserver refuses watches for a moment while a CRD's storage is re-initialised (429).
        void new Promise((r) => setTimeout(r, err ? 500 : 0)).then(async () => {
          if (rv === '') rv = await currentVersion();
          await start();
        });
      },
    );
  };
  await start();
  return {
    when(key, until) {
      return new Promise((resolve) => {
        const list = waiting.get(key) ?? [];
        list.push({ until, resolve });
        waiting.set(key, list);
      });
    },
    onEvent: (fn) => listeners.push(fn),
    stop() {
      stopped = true;
      current?.abort();
    },
  };
}

// --- the gate as a process ---------------------------------------------------------------

const HEAP_PROBE = fileURLToPath(new URL('./_heap-probe.mjs', import.meta.url));

export interface ScaleGate {
  process: GateProcess;
  pid: number;
  /** performance.now() when it was spawned and when /readyz first answered 200. */
  spawnedAt: number;
  readyAt: number;
  /** The gate's log lines (JSON), from `from` (an index into the whole output) on. */
  logLines(from?: number): { lines: Record<string, unknown>[]; next: number };
}

/** Runs the compiled gate (`cli`) at info level (or `logLevel`), with the heap probe loaded (bench/_heap-probe.mjs). */
export async function spawnScaleGate(
  cli: string,
  opts: {
    kubeconfig: string;
    instance: string;
    webhook: number;
    sink: number;
    heapFile: string;
    logLevel?: string;
    args?: string[];
    /** The gate's NODE_OPTIONS (the heap probe is added to them). */
    nodeOptions?: string;
    /** More environment for the gate (e.g. the allocator's settings of config/500-gate.yaml). */
    env?: Record<string, string>;
  },
): Promise<ScaleGate> {
  const inherited = process.env.NODE_OPTIONS;
  const extra = Object.entries(opts.env ?? {}).filter(([name]) => name !== 'NODE_OPTIONS');
  const before = extra.map(([name]) => [name, process.env[name]] as const);
  for (const [name, value] of extra) process.env[name] = value;
  process.env.NODE_OPTIONS = `${opts.nodeOptions ?? ''} --import ${HEAP_PROBE}`.trim();
  process.env.BENCH_HEAP_FILE = opts.heapFile;
  // The compiled CLI as such (startGateProcess's `cli` option runs a source tree under tsx).
  process.env[GATE_CLI_ENV] = cli;
  const spawnedAt = performance.now();
  let gate: GateProcess;
  try {
    gate = await startGateProcess({
      readyPort: opts.sink,
      args: [
        '--kubeconfig',
        opts.kubeconfig,
        '--instance',
        opts.instance,
        '--namespace-selector',
        `prestart.dev/gate=${opts.instance}`,
        ...listenArgs({ webhook: opts.webhook, sink: opts.sink }),
        '--log-level',
        opts.logLevel ?? 'info',
        ...(opts.args ?? []),
      ],
    });
  } finally {
    if (inherited === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = inherited;
    for (const [name, value] of before) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
  const readyAt = performance.now();
  return {
    process: gate,
    pid: gate.child.pid as number,
    spawnedAt,
    readyAt,
    logLines(from = 0) {
      const out = gate.output();
      const lines: Record<string, unknown>[] = [];
      for (const line of out.slice(from).split('\n')) {
        if (!line.startsWith('{') || !line.endsWith('}')) continue;
        try {
          lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // A line cut at the end of the buffer: read again next time.
        }
      }
      // A line still being written is read again next time.
      return { lines, next: from + out.slice(from).lastIndexOf('\n') + 1 };
    },
  };
}

export interface GcReading {
  /** V8 heap in use after a full collection, KiB. */
  heapUsed: number;
  /** V8 heap committed (all spaces, the young generation included), KiB. */
  heapTotal: number;
  /** VmRSS right after it, KiB. */
  rss: number;
}

/** Asks the gate's heap probe for a full collection (SIGUSR2); its heap in use and resident set after it. */
export async function afterGc(pid: number, heapFile: string): Promise<GcReading> {
  rmSync(heapFile, { force: true });
  process.kill(pid, 'SIGUSR2');
  const usage = await waitFor(() => existsSync(heapFile) && (JSON.parse(readFileSync(heapFile, 'utf8')) as NodeJS.MemoryUsage), {
    timeoutMs: 30_000,
    what: "the gate's heap probe to answer",
  });
  rmSync(heapFile, { force: true });
  return { heapUsed: usage.heapUsed / 1024, heapTotal: usage.heapTotal / 1024, rss: memoryKiB(pid).rss };
}

/** VmRSS split (proc(5)): anonymous memory (heaps) and file-backed pages (the node binary's code), KiB. */
export function rssParts(pid: number): { anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { anon: field('RssAnon'), file: field('RssFile') };
}

/** Resets VmHWM (the peak resident set) of a process of ours to its current RSS (proc(5), clear_refs "5"). */
export function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

export function heapFileFor(tag: string): string {
  return join(tmpdir(), `bench-scale-${process.pid}-${tag}.json`);
}
