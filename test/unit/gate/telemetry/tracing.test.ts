// The trace ids the gate derives, and the traceparent it reads and writes.
import test from 'ava';
import {
  attemptSpanId,
  formatTraceparent,
  parseTraceparent,
  runSpanId,
  runTraceId,
  startTracing,
  tracingFromEnv,
} from '../../../../gate/telemetry/tracing.ts';

test('ids are derived from the run, hook and attempt: the same on every replica, different for each attempt', (t) => {
  t.regex(runTraceId('run-1'), /^[0-9a-f]{32}$/);
  t.regex(runSpanId('run-1'), /^[0-9a-f]{16}$/);
  t.is(runTraceId('run-1'), runTraceId('run-1'));
  t.not(runTraceId('run-1'), runTraceId('run-2'));
  t.not(attemptSpanId('run-1', 'db', 1), attemptSpanId('run-1', 'db', 2));
  t.not(attemptSpanId('run-1', 'db', 1), attemptSpanId('run-1', 'cache', 1));
  t.not(attemptSpanId('run-1', 'db', 1), runSpanId('run-1'));
});

test('a traceparent round-trips; anything malformed or all-zero is ignored', (t) => {
  const tp = formatTraceparent(runTraceId('r'), attemptSpanId('r', 'db', 1), true);
  t.deepEqual(parseTraceparent(tp), { traceId: runTraceId('r'), spanId: attemptSpanId('r', 'db', 1), traceFlags: 1 });
  for (const bad of [
    undefined,
    '',
    'garbage',
    `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`,
    `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01`,
    `01-${'a'.repeat(32)}-${'b'.repeat(16)}-01`,
  ]) {
    t.is(parseTraceparent(bad), undefined, String(bad));
  }
});

test('without an exporter requests still carry the attempt traceparent, unsampled', async (t) => {
  const tracing = await startTracing(undefined);
  t.false(tracing.enabled);
  t.is(tracing.traceparent('r', 'db', 1), `00-${runTraceId('r')}-${attemptSpanId('r', 'db', 1)}-00`);
});

test('with an exporter the traceparent is sampled, and the endpoint comes from the standard variables', async (t) => {
  const tracing = await startTracing({ endpoint: 'http://127.0.0.1:9/v1/traces' });
  t.true(tracing.enabled);
  t.true(tracing.traceparent('r', 'db', 1).endsWith('-01'));
  await tracing.shutdown();
  t.deepEqual(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), { endpoint: 'http://collector:4318/v1/traces' });
  t.deepEqual(tracingFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c/t', OTEL_SERVICE_NAME: 'gate-a' }), {
    endpoint: 'http://c/t',
    serviceName: 'gate-a',
  });
  t.is(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_SDK_DISABLED: 'true' }), undefined);
  t.is(tracingFromEnv({}), undefined);
});
