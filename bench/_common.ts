// Small pieces the gate benches share: percentiles, the machine's load next to every figure,
// process memory from /proc, and the control plane's processes.
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { PID_STATE_FILE, type PidState } from '@knative-prestart/devcluster/leftovers.ts';

export interface Summary {
  n: number;
  p50: number;
  p99: number;
}

/** Nearest-rank percentile of `sorted` (ascending). */
function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function summarize(values: number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

/** "load 12.3 / 11.0 / 9.8 on 2 CPUs": figures from a shared machine mean little without it. */
export function load(): string {
  const [one, five, fifteen] = loadavg().map((l) => l.toFixed(1));
  return `load average ${one} / ${five} / ${fifteen} (1/5/15 min) on ${cpus().length} CPUs`;
}

export const ms = (v: number): string => (Number.isFinite(v) ? v.toFixed(2) : '-');

/** Prints rows as aligned columns; the first row is the header. */
export function table(rows: string[][]): void {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length))) ?? [];
  for (const [i, row] of rows.entries()) {
    console.log(`  ${row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('   ')}`);
    if (i === 0) console.log(`  ${widths.map((w) => '-'.repeat(w)).join('   ')}`);
  }
}

export interface ProcessMemory {
  /** Resident set now, KiB. */
  rss: number;
  /** Peak resident set since the process started, KiB. */
  hwm: number;
}

export function memoryKiB(pid: number): ProcessMemory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: field('VmRSS'), hwm: field('VmHWM') };
}

/** Memory of the control plane's processes (etcd, kube-apiserver, ...), by component name. */
export function controlPlaneMemory(clusterDir: string): { name: string; memory: ProcessMemory }[] {
  const file = join(clusterDir, PID_STATE_FILE);
  if (!existsSync(file)) return [];
  const state = JSON.parse(readFileSync(file, 'utf8')) as PidState;
  return state.components.flatMap((c) => {
    try {
      return [{ name: c.name, memory: memoryKiB(c.pid) }];
    } catch {
      return [];
    }
  });
}

/** How to run this bench again, with the arguments it was given. */
export function reproduce(script: string): void {
  const args = process.argv.slice(2).join(' ');
  console.log(`reproduce: node --import tsx ${script}${args ? ` ${args}` : ''}`);
  console.log('  (set KNATIVE_PRESTART_KUBECONFIG to reuse a running control plane; else one is started and stopped)');
}

/** The many waits of a bench run, a few at a time: `fn(i)` for i in [0, count). */
export async function inBatches(count: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

/** Counts the retries `retryOnWebhookReset` made, for the figures' footnote. */
export const webhookResets = { count: 0 };

/**
 * Runs `fn`, again (up to 3 times) when the apiserver reports that a webhook connection was reset,
 * as Knative's reconciler would on its next try. Node closes idle keep-alive connections after
 * 5 s while the apiserver's Go client keeps them for 90 s, so a request now and then meets a
 * connection closing under it; the bench counts these instead of dying on them.
 */
export async function retryOnWebhookReset<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const body = String((err as { body?: unknown }).body ?? '');
      if (attempt >= 3 || !/failed calling webhook.*(connection reset by peer|EOF)/.test(body)) throw err;
      webhookResets.count++;
    }
  }
}

/** A histogram's sum and count in Prometheus text, over every series of `metric` whose labels match. */
export function histogram(text: string, metric: string, labels: RegExp): { sum: number; count: number } {
  let sum = 0;
  let count = 0;
  for (const m of text.matchAll(new RegExp(`^${metric}_(sum|count)\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
    if (!labels.test(m[2] as string)) continue;
    if (m[1] === 'sum') sum += Number(m[3]);
    else count += Number(m[3]);
  }
  return { sum, count };
}

/** Mean milliseconds per observation between two readings of one histogram; NaN when nothing was observed. */
export function meanMsBetween(before: { sum: number; count: number }, after: { sum: number; count: number }): number {
  const count = after.count - before.count;
  return count > 0 ? ((after.sum - before.sum) / count) * 1000 : Number.NaN;
}
