// The hook's part of the gate's trace: the handler runs in a span that continues the request's
// `traceparent` (the gate's attempt span), and the final reply carries the handler span's
// traceparent, so the gate's reply span joins the same trace. Only @opentelemetry/api is used:
// the hook's process decides whether and where spans go by registering a tracer provider (see
// docs/operations.md). Without one nothing is recorded, and the reply carries the request's own
// traceparent, which still ties the reply to the attempt.
import { context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { EXT_TRACEPARENT } from '../../schemas/attributes.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import type { HookRequest } from './types.ts';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

export interface HandlerSpan {
  /** Runs the handler with the span active (for the handler's own instrumentation, when a context manager is registered). */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Ends the span; `thrown` marks it failed. */
  end(outcome: { succeeded: boolean; message?: string } | { thrown: unknown }): void;
  /** Puts the span's traceparent on a reply. */
  stamp(event: CloudEventRecord): CloudEventRecord;
}

export function startHandlerSpan(request: HookRequest): HandlerSpan {
  const m = TRACEPARENT.exec(String(request.event[EXT_TRACEPARENT] ?? ''));
  const parent =
    m && !/^0+$/.test(m[1] as string) && !/^0+$/.test(m[2] as string)
      ? trace.setSpanContext(ROOT_CONTEXT, {
          traceId: m[1] as string,
          spanId: m[2] as string,
          traceFlags: Number.parseInt(m[3] as string, 16),
          isRemote: true,
        })
      : ROOT_CONTEXT;
  const span: Span = trace.getTracer('knative-prestart-hook-sdk').startSpan(
    'prestart.hook',
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'prestart.hook': request.hook,
        'prestart.attempt': request.attempt,
        'prestart.namespace': request.revision.namespace,
        'prestart.revision': request.revision.name,
      },
    },
    parent,
  );
  return {
    run: (fn) => context.with(trace.setSpan(parent, span), fn),
    end(outcome) {
      if ('thrown' in outcome) {
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: outcome.thrown instanceof Error ? outcome.thrown.message : String(outcome.thrown),
        });
      } else {
        span.setAttribute('prestart.outcome', outcome.succeeded ? 'succeeded' : 'failed');
        if (!outcome.succeeded) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.message ?? 'failed' });
      }
      span.end();
    },
    stamp(event) {
      const sc = span.spanContext();
      // A span with no valid context (no parent, no provider) has nothing to continue.
      if (!trace.isSpanContextValid(sc)) return event;
      event[EXT_TRACEPARENT] = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 1) === 1 ? '01' : '00'}`;
      return event;
    },
  };
}
