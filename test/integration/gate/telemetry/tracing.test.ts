// One trace across the bus, exported over OTLP to a real receiver (Jaeger v2, built from its Go
// module): the gate's run span, the attempt span the request's traceparent names, the hook SDK's
// handler span continuing it, and the gate's reply span joining from the reply's traceparent.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type Jaeger, type JaegerSpan, startJaeger } from '@knative-prestart/devcluster/jaeger.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import test from 'ava';
import { attemptSpanId, runSpanId, runTraceId } from '../../../../gate/telemetry/tracing.ts';
import { type HookServer, serveHook, succeed } from '../../../../hooks/sdk/index.ts';

let jaeger: Jaeger;
let env: GateEnv;
let hook: HookServer;
let hookProvider: BasicTracerProvider;
const received: string[] = [];

test.before(async () => {
  jaeger = await startJaeger();
  env = await gateEnv('traces', { inProcess: false });
  await env.startGate({ tracing: { endpoint: jaeger.otlpTracesUrl, exportDelayMs: 100 } });
  // The hook's process registers its own provider, as a hook author would: the SDK only uses the API.
  hookProvider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'test-hook' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: jaeger.otlpTracesUrl }))],
  });
  trace.setGlobalTracerProvider(hookProvider);
  hook = await serveHook({
    name: `${env.instance}-db`,
    host: '127.0.0.1',
    port: 0,
    handler: async (request) => {
      received.push(String(request.event.traceparent));
      return succeed('database ready');
    },
  });
});

test.after.always(async () => {
  await hook?.close();
  await hookProvider?.shutdown();
  trace.disable();
  await env?.stop();
  await jaeger?.stop();
});

const parentOf = (span: JaegerSpan) => span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;

test('a hold and release with an SDK hook is one trace: run, attempt, handler, reply', async (t) => {
  const hookName = `${env.instance}-db`;
  await env.createHook(hookName, { match: env.annotationMatch('traced', 'yes'), delivery: { transport: 'http', url: hook.url } });
  await env.waitUntilStamped(hookName, { traced: 'yes' });
  await env.createRevision('traced-00001', { annotations: { traced: 'yes' } });
  await env.waitReleased('traced-00001');
  const run = await env.getRun('traced-00001');
  const runUID = run?.metadata?.uid ?? '';
  const traceId = runTraceId(runUID);
  const attemptSpan = attemptSpanId(runUID, hookName, 1);
  t.deepEqual(received, [`00-${traceId}-${attemptSpan}-01`], "the request's traceparent is the attempt's span");

  const names = ['prestart.run', 'prestart.attempt', 'prestart.hook', 'prestart.reply'];
  const found = await waitFor(
    async () => {
      const tr = await jaeger.trace(traceId);
      const spans = Object.fromEntries((tr?.spans ?? []).map((s) => [s.operationName, s]));
      return names.every((n) => spans[n]) && tr ? { spans, tr } : undefined;
    },
    { what: `trace ${traceId} in Jaeger with ${names.join(', ')}`, timeoutMs: 30_000, intervalMs: 250 },
  );
  const { spans, tr } = found;
  const [runSpan, attempt, handler, reply] = names.map((n) => spans[n] as JaegerSpan) as [JaegerSpan, JaegerSpan, JaegerSpan, JaegerSpan];
  t.is(runSpan.spanID, runSpanId(runUID));
  t.is(parentOf(runSpan), undefined, 'the run span is the root');
  t.is(attempt.spanID, attemptSpan);
  t.is(parentOf(attempt), runSpan.spanID);
  t.is(parentOf(handler), attempt.spanID, "the hook's handler continues the request's traceparent");
  t.is(parentOf(reply), handler.spanID, "the gate's reply span continues the reply's traceparent");
  const service = (s: JaegerSpan) => tr.processes[s.processID]?.serviceName;
  t.deepEqual([runSpan, attempt, handler, reply].map(service), [
    'knative-prestart-gate',
    'knative-prestart-gate',
    'test-hook',
    'knative-prestart-gate',
  ]);
  const tag = (s: JaegerSpan, key: string) => s.tags.find((x) => x.key === key)?.value;
  t.is(tag(attempt, 'prestart.outcome'), 'succeeded');
  t.is(tag(attempt, 'prestart.transport'), 'http');
  t.is(tag(reply, 'prestart.result'), 'applied');
  t.is(tag(runSpan, 'prestart.phase'), 'Released');
  t.true(runSpan.startTime <= attempt.startTime && attempt.startTime <= handler.startTime, 'spans start in order');
});
