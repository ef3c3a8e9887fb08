// A real OTLP receiver and trace store for tests: Jaeger v2 (cmd/jaeger, built from its Go module by
// build-binaries.sh), with in-memory storage, its OTLP/HTTP receiver and query API on free ports of
// 127.0.0.1 and nothing else listening (no gRPC receiver, no UI assets, no self-metrics).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import { freePorts } from './ports.ts';
import { findExecutable, startService } from './service.ts';

export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; traceID: string; spanID: string }[];
  startTime: number;
  duration: number;
  tags: { key: string; value: unknown }[];
  processID: string;
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

export interface Jaeger {
  /** Where OTLP/HTTP exporters send spans: http://127.0.0.1:PORT/v1/traces */
  otlpTracesUrl: string;
  /** The query API (Jaeger's HTTP JSON API). */
  queryUrl: string;
  logFile: string;
  /** One trace by id (32 hex digits), or undefined while Jaeger has none. */
  trace(traceId: string): Promise<JaegerTrace | undefined>;
  stop(): Promise<void>;
}

export function jaegerBinary(): string {
  const version = pinnedVersions().JAEGER_VERSION ?? 'v1.76.0';
  const path = process.env.JAEGER_BIN ?? join(cacheDir(), 'bin', `jaeger-${version}`, 'jaeger');
  return findExecutable([path], `no jaeger binary at ${path}: run ${BUILD_SCRIPT} jaeger (pinned ${version}), or set JAEGER_BIN`);
}

export async function startJaeger(opts: { timeoutMs?: number } = {}): Promise<Jaeger> {
  const binary = jaegerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'prestart-jaeger-'));
  const [otlpPort, queryPort, queryGrpcPort] = (await freePorts(3)) as [number, number, number];
  const configFile = join(dir, 'jaeger.yaml');
  // Jaeger v2's config is an OpenTelemetry Collector config (JSON is YAML).
  writeFileSync(
    configFile,
    JSON.stringify({
      service: {
        extensions: ['jaeger_storage', 'jaeger_query'],
        pipelines: { traces: { receivers: ['otlp'], processors: ['batch'], exporters: ['jaeger_storage_exporter'] } },
        telemetry: { metrics: { level: 'none' }, logs: { level: 'warn' } },
      },
      extensions: {
        jaeger_storage: { backends: { memstore: { memory: { max_traces: 10_000 } } } },
        jaeger_query: {
          storage: { traces: 'memstore' },
          http: { endpoint: `127.0.0.1:${queryPort}` },
          grpc: { endpoint: `127.0.0.1:${queryGrpcPort}` },
        },
      },
      receivers: { otlp: { protocols: { http: { endpoint: `127.0.0.1:${otlpPort}` } } } },
      processors: { batch: { timeout: '100ms' } },
      exporters: { jaeger_storage_exporter: { trace_storage: 'memstore' } },
    }),
  );
  const queryUrl = `http://127.0.0.1:${queryPort}`;
  const { component, stop } = await startService(
    { name: 'jaeger', command: binary, args: ['--config', configFile], hardStop: true },
    dir,
    async () => {
      const [query, otlp] = await Promise.all([
        fetch(`${queryUrl}/api/services`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined),
        // An empty export is a valid OTLP request: the receiver answers 200 once it listens.
        fetch(`http://127.0.0.1:${otlpPort}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"resourceSpans":[]}',
          signal: AbortSignal.timeout(1000),
        }).catch(() => undefined),
      ]);
      return query?.ok === true && otlp?.ok === true;
    },
    { what: `jaeger to serve its query API on ${queryUrl} and OTLP on 127.0.0.1:${otlpPort}`, timeoutMs: opts.timeoutMs ?? 30_000 },
  );
  return {
    otlpTracesUrl: `http://127.0.0.1:${otlpPort}/v1/traces`,
    queryUrl,
    logFile: component.logFile,
    async trace(traceId) {
      const res = await fetch(`${queryUrl}/api/traces/${traceId}`, { signal: AbortSignal.timeout(5000) });
      if (res.status === 404) return undefined;
      if (!res.ok) throw new Error(`jaeger GET /api/traces/${traceId}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { data?: JaegerTrace[] };
      return body.data?.[0];
    },
    stop,
  };
}
