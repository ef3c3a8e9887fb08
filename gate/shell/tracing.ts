// OpenTelemetry traces of the gate, exported over OTLP/HTTP. One trace per PrestartRun: a run span
// (the hold, from the Revision's creation to its release) with one child span per hook attempt
// (request to answer), under which the hook's handler span and the gate's reply span hang. The
// request's `traceparent` is made from the attempt's span, so a hook continues the trace across
// whatever bus carried the request.
//
// Why the ids are derived, not drawn: a run outlives any one reconcile, process or leader, and a
// resend must carry the same traceparent as the first send (it is the same CloudEvent). So the
// trace id and the run span's id are hashes of the run's UID, an attempt span's id a hash of
// (run, hook, attempt): any replica, before or after a restart, names the same spans. The run and
// attempt spans are recorded when they end, with the start time read from the status.
import { createHash } from 'node:crypto';
import { context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, TraceFlags, type Tracer, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type IdGenerator, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
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

/** The standard OpenTelemetry variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is) or OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces). */
export function tracingFromEnv(env: NodeJS.ProcessEnv = process.env): TracingConfig | undefined {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (!endpoint) return undefined;
  return { endpoint, ...(env.OTEL_SERVICE_NAME ? { serviceName: env.OTEL_SERVICE_NAME } : {}) };
}

export type AttemptOutcome = 'succeeded' | 'failed' | 'timed_out' | 'cancelled';

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

/** Hands out the next span's ids when told to, random ones otherwise (the reply spans). */
class DerivedIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  next: { traceId?: string; spanId: string } | undefined;
  generateTraceId(): string {
    return this.next?.traceId ?? this.random.generateTraceId();
  }
  generateSpanId(): string {
    return this.next?.spanId ?? this.random.generateSpanId();
  }
}

export function startTracing(config: TracingConfig | undefined): Tracing {
  if (!config) return disabledTracing;
  const ids = new DerivedIds();
  const provider = new BasicTracerProvider({
    idGenerator: ids,
    resource: resourceFromAttributes({ 'service.name': config.serviceName ?? 'knative-prestart-gate' }),
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: config.endpoint }), { scheduledDelayMillis: config.exportDelayMs ?? 2000 }),
    ],
  });
  const tracer: Tracer = provider.getTracer('knative-prestart-gate');

  /** startSpan draws its ids synchronously: set them, start, clear. */
  const startDerived = (name: string, ids_: { traceId?: string; spanId: string }, start: Date, parentSpanId?: string): Span => {
    const parent =
      parentSpanId === undefined || ids_.traceId === undefined
        ? ROOT_CONTEXT
        : trace.setSpanContext(ROOT_CONTEXT, {
            traceId: ids_.traceId,
            spanId: parentSpanId,
            traceFlags: TraceFlags.SAMPLED,
            isRemote: true,
          });
    ids.next = parentSpanId === undefined ? ids_ : { spanId: ids_.spanId };
    try {
      return tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: start }, parent);
    } finally {
      ids.next = undefined;
    }
  };

  return {
    enabled: true,
    traceparent: (runUID, hook, attempt) => formatTraceparent(runTraceId(runUID), attemptSpanId(runUID, hook, attempt), true),
    recordRun(s) {
      const span = startDerived('prestart.run', { traceId: runTraceId(s.runUID), spanId: runSpanId(s.runUID) }, s.start);
      span.setAttributes({ 'prestart.namespace': s.namespace, 'prestart.revision': s.revision, 'prestart.phase': s.phase });
      span.end(s.end);
    },
    recordAttempt(s) {
      const traceId = runTraceId(s.runUID);
      const span = startDerived(
        'prestart.attempt',
        { traceId, spanId: attemptSpanId(s.runUID, s.hook, s.attempt) },
        s.start,
        runSpanId(s.runUID),
      );
      span.setAttributes({
        'prestart.namespace': s.namespace,
        'prestart.revision': s.revision,
        'prestart.hook': s.hook,
        'prestart.attempt': s.attempt,
        'prestart.transport': s.transport,
        'prestart.outcome': s.outcome,
        'prestart.resends': s.resends,
      });
      if (s.outcome !== 'succeeded') span.setStatus({ code: SpanStatusCode.ERROR, message: s.message ?? s.outcome });
      span.end(s.end);
    },
    traceReplies(record) {
      return async (reply) => {
        const remote = parseTraceparent(reply.traceparent);
        const parent = remote ? trace.setSpanContext(ROOT_CONTEXT, { ...remote, isRemote: true }) : ROOT_CONTEXT;
        const span = tracer.startSpan('prestart.reply', { kind: SpanKind.CONSUMER }, parent);
        span.setAttributes({
          'prestart.namespace': reply.namespace,
          'prestart.revision': reply.revision,
          'prestart.hook': reply.hook,
          'prestart.attempt': reply.attempt,
          'prestart.outcome': reply.outcome,
        });
        try {
          const disposition = await context.with(trace.setSpan(context.active(), span), () => record(reply));
          span.setAttribute('prestart.result', disposition.type);
          if (disposition.type === 'rejected') span.setStatus({ code: SpanStatusCode.ERROR, message: disposition.reason });
          return disposition;
        } catch (err) {
          span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
          throw err;
        } finally {
          span.end();
        }
      };
    },
    shutdown: () => provider.shutdown(),
  };
}

/** No exporter: requests still carry a traceparent (unsampled), so hooks can correlate their logs. */
const disabledTracing: Tracing = {
  enabled: false,
  traceparent: (runUID, hook, attempt) => formatTraceparent(runTraceId(runUID), attemptSpanId(runUID, hook, attempt), false),
  recordRun: () => undefined,
  recordAttempt: () => undefined,
  traceReplies: (record) => record,
  shutdown: async () => undefined,
};
