// Reading a Job and its pods into what the hook reports. Pure.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { JOB_CONTAINER } from './manifest.ts';

export type JobState =
  | { state: 'running'; active: number; failed: number }
  | { state: 'complete' }
  | { state: 'failed'; reason: string; message: string };

export function jobState(job: V1Job): JobState {
  const conditions = job.status?.conditions ?? [];
  const isTrue = (type: string) => conditions.find((c) => c.type === type && c.status === 'True');
  if (isTrue('Complete')) return { state: 'complete' };
  const failed = isTrue('Failed');
  if (failed) return { state: 'failed', reason: failed.reason ?? 'Failed', message: failed.message ?? '' };
  return { state: 'running', active: job.status?.active ?? 0, failed: job.status?.failed ?? 0 };
}

/** The most recent failed pod of a Job, if any. */
export function lastFailedPod(pods: readonly V1Pod[]): V1Pod | undefined {
  const created = (p: V1Pod) => new Date(p.metadata?.creationTimestamp ?? 0).getTime();
  return [...pods].filter((p) => p.status?.phase === 'Failed').sort((a, b) => created(b) - created(a))[0];
}

/** "container prestart exited with code 1 (Error): relation exists", or why the pod failed. */
export function describePodFailure(pod: V1Pod): string {
  const status = pod.status?.containerStatuses?.find((c) => c.name === JOB_CONTAINER) ?? pod.status?.containerStatuses?.[0];
  const ended = status?.state?.terminated ?? status?.lastState?.terminated;
  if (ended) {
    const why = [ended.reason, ended.message?.trim()].filter(Boolean).join(': ');
    return `container ${status?.name} exited with code ${ended.exitCode}${why ? ` (${why})` : ''}`;
  }
  const why = [pod.status?.reason, pod.status?.message].filter(Boolean).join(': ');
  return why || 'the pod failed without a reason';
}

export interface FailureReport {
  namespace: string;
  job: string;
  reason: string;
  message: string;
  pod?: { name: string; failure: string };
  /** The tail of the pod's log, or why there is none. */
  logs: { lines: string; count: number } | { unavailable: string };
}

export function failureMessage(r: FailureReport): string {
  const parts = [`Job ${r.namespace}/${r.job} failed: ${r.reason}${r.message ? ` (${r.message})` : ''}`];
  if (r.pod) parts.push(`pod ${r.pod.name}: ${r.pod.failure}`);
  const head = parts.join('; ');
  if ('unavailable' in r.logs) return `${head}; no logs available (${r.logs.unavailable})`;
  const text = r.logs.lines.trimEnd();
  if (text === '') return `${head}; the pod logged nothing`;
  // The message holds 4096 characters: keep the end of the log, where the error is.
  const room = Math.max(200, 3800 - head.length);
  const tail = text.length > room ? `…${text.slice(text.length - room)}` : text;
  return `${head}; last ${r.logs.count} log lines:\n${tail}`;
}
