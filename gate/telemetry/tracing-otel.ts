// The gate's spans through the OpenTelemetry SDK, exported over OTLP/HTTP (tracing.ts says what
// they are and how their ids are derived). Loaded by startTracing only when an endpoint is set.
import { context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, TraceFlags, type Tracer, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type IdGenerator, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
import {
  attemptSpanId,
  formatTraceparent,
  parseTraceparent,
  runSpanId,
  runTraceId,
  type Tracing,
  type TracingConfig,
} from './trace-context.ts';

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

export function exportingTracing(config: TracingConfig): Tracing {
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
      // A retry is not an error: the hook asked to be asked again, and the next attempt's span follows.
      if (s.outcome !== 'succeeded' && s.outcome !== 'retry')
        span.setStatus({ code: SpanStatusCode.ERROR, message: s.message ?? s.outcome });
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
