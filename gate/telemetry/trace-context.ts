// What the gate's tracing is, apart from the SDK that exports it: the configuration, the spans
// recorded, and the ids and traceparents derived from a run (tracing.ts explains why derived).
import { createHash } from 'node:crypto';
import type { Reply } from '../../api/types.ts';
import type { ReplyDisposition } from '../../sinks/types.ts';

export interface TracingConfig {
  /** OTLP/HTTP traces endpoint, e.g. http://jaeger-collector:4318/v1/traces. */
  endpoint: string;
  /** service.name of the spans; default knative-prestart-gate. */
  serviceName?: string;
  /** Longest time a finished span waits in the batch before export; default 2 s. */
  exportDelayMs?: number;
}

/** How an attempt ended; `retry`: the hook asked to be asked again (the next attempt follows). */
export type AttemptOutcome = 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'retry';

export interface RunSpan {
  runUID: string;
  namespace: string;
  revision: string;
  /** When the hold began (the Revision was created and stamped). */
  start: Date;
  end: Date;
  phase: 'Released' | 'Cancelled';
}

export interface AttemptSpan {
  runUID: string;
  namespace: string;
  revision: string;
  hook: string;
  attempt: number;
  transport: string;
  start: Date;
  end: Date;
  outcome: AttemptOutcome;
  message?: string;
  /** Requests sent for this attempt beyond the first. */
  resends: number;
}

export interface Tracing {
  readonly enabled: boolean;
  /** The request's traceparent: the attempt's span, flagged sampled when this gate exports. */
  traceparent(runUID: string, hook: string, attempt: number): string;
  recordRun(span: RunSpan): void;
  recordAttempt(span: AttemptSpan): void;
  /** Wraps the reply recorder: each verified reply is recorded inside a span that continues the reply's traceparent. */
  traceReplies(record: (reply: Reply) => Promise<ReplyDisposition>): (reply: Reply) => Promise<ReplyDisposition>;
  /** Exports what is still buffered. */
  shutdown(): Promise<void>;
}

const hex = (what: string, chars: number): string => {
  const h = createHash('sha256').update(what).digest('hex').slice(0, chars);
  // An all-zero id is invalid in W3C trace context; a hash that starts so is vanishingly rare.
  return /^0+$/.test(h) ? `${h.slice(0, -1)}1` : h;
};
export const runTraceId = (runUID: string): string => hex(`prestart-run-trace/${runUID}`, 32);
export const runSpanId = (runUID: string): string => hex(`prestart-run-span/${runUID}`, 16);
export const attemptSpanId = (runUID: string, hook: string, attempt: number): string =>
  hex(`prestart-attempt-span/${runUID}/${hook}/${attempt}`, 16);

export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The span context a W3C traceparent names, or undefined for anything malformed (a hook may send anything). */
export function parseTraceparent(value: string | undefined): { traceId: string; spanId: string; traceFlags: number } | undefined {
  const m = value === undefined ? null : TRACEPARENT.exec(value.trim());
  if (!m || /^0+$/.test(m[1] as string) || /^0+$/.test(m[2] as string)) return undefined;
  return { traceId: m[1] as string, spanId: m[2] as string, traceFlags: Number.parseInt(m[3] as string, 16) };
}
