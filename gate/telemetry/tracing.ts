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
//
// The OpenTelemetry SDK (tracing-otel.ts) is loaded only when an endpoint is configured: a gate
// that exports no spans does not carry it (the gate's memory).
import { attemptSpanId, formatTraceparent, runTraceId, type Tracing, type TracingConfig } from './trace-context.ts';

export {
  type AttemptOutcome,
  type AttemptSpan,
  attemptSpanId,
  formatTraceparent,
  parseTraceparent,
  type RunSpan,
  runSpanId,
  runTraceId,
  type Tracing,
  type TracingConfig,
} from './trace-context.ts';

/** The standard OpenTelemetry variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is) or OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces). */
export function tracingFromEnv(env: NodeJS.ProcessEnv = process.env): TracingConfig | undefined {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (!endpoint) return undefined;
  return { endpoint, ...(env.OTEL_SERVICE_NAME ? { serviceName: env.OTEL_SERVICE_NAME } : {}) };
}

/** Spans exported over OTLP when `config` is given (the SDK is loaded then), else none. */
export async function startTracing(config: TracingConfig | undefined): Promise<Tracing> {
  if (!config) return noTracing;
  const { exportingTracing } = await import('./tracing-otel.ts');
  return exportingTracing(config);
}

/** No exporter: requests still carry a traceparent (unsampled), so hooks can correlate their logs. */
export const noTracing: Tracing = {
  enabled: false,
  traceparent: (runUID, hook, attempt) => formatTraceparent(runTraceId(runUID), attemptSpanId(runUID, hook, attempt), false),
  recordRun: () => undefined,
  recordAttempt: () => undefined,
  traceReplies: (record) => record,
  shutdown: async () => undefined,
};
