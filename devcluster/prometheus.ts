// A real Prometheus for tests: Debian's `prometheus` package (apt-get install prometheus; .ci/run
// installs it), started here with a config of ours, its TSDB in a temporary directory and its web
// API on a free port of 127.0.0.1. The package's systemd service is never used.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterStartError } from './errors.ts';
import { freePorts } from './ports.ts';
import { findExecutable, onPath, startService } from './service.ts';

export interface PrometheusOptions {
  /** host:port of each /metrics endpoint to scrape (job "gate"). */
  targets: string[];
  /** Default 1 s: a test waits for values, so a short interval keeps it short. */
  scrapeIntervalSeconds?: number;
  /** Rule files to load (alerting or recording rules). */
  ruleFiles?: string[];
  timeoutMs?: number;
}

/** One sample of an instant vector. */
export interface Sample {
  metric: Record<string, string>;
  value: number;
}

export interface Prometheus {
  /** http://127.0.0.1:PORT */
  url: string;
  binary: string;
  logFile: string;
  /** An instant query through the HTTP API; throws with Prometheus's error for a bad expression. */
  query(expr: string): Promise<Sample[]>;
  /** Rule groups as /api/v1/rules reports them (health, lastError of each rule). */
  rules(): Promise<{ name: string; health: string; lastError?: string; type: string }[]>;
  stop(): Promise<void>;
}

/** $PROMETHEUS_BIN, else prometheus on PATH (Debian's package puts it in /usr/bin). */
export function prometheusBinary(): string {
  return findExecutable(
    [process.env.PROMETHEUS_BIN, ...onPath('prometheus')],
    'no prometheus binary: apt-get install prometheus (Debian), or set PROMETHEUS_BIN',
  );
}

export async function startPrometheus(opts: PrometheusOptions): Promise<Prometheus> {
  const binary = prometheusBinary();
  const dir = mkdtempSync(join(tmpdir(), 'prestart-prometheus-'));
  const [port] = await freePorts(1);
  if (port === undefined) throw new ClusterStartError('no free port for prometheus');
  const interval = `${opts.scrapeIntervalSeconds ?? 1}s`;
  const configFile = join(dir, 'prometheus.yml');
  // JSON is YAML: no YAML writer needed for a config this small.
  writeFileSync(
    configFile,
    JSON.stringify({
      global: { scrape_interval: interval, evaluation_interval: interval },
      rule_files: opts.ruleFiles ?? [],
      scrape_configs: [{ job_name: 'gate', static_configs: [{ targets: opts.targets }] }],
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const { component, stop } = await startService(
    {
      name: 'prometheus',
      command: binary,
      args: [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        // Debian's build looks for its console templates under /etc; none are used here.
        `--web.console.templates=${dir}`,
        `--web.console.libraries=${dir}`,
      ],
      hardStop: true,
    },
    dir,
    async () => {
      const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined);
      return res?.ok === true;
    },
    { what: `prometheus on ${url} to be ready`, timeoutMs: opts.timeoutMs ?? 30_000 },
  );

  async function api<T>(path: string): Promise<T> {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data: T; error?: string; errorType?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.errorType ?? res.status}: ${body.error ?? 'no error text'}`);
    return body.data;
  }

  return {
    url,
    binary,
    logFile: component.logFile,
    async query(expr) {
      const data = await api<{ resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(expr)}`,
      );
      if (data.resultType === 'scalar') {
        const [, v] = data.result as unknown as [number, string];
        return [{ metric: {}, value: Number(v) }];
      }
      return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    async rules() {
      const data = await api<{ groups: { rules: { name: string; health: string; lastError?: string; type: string }[] }[] }>(
        '/api/v1/rules',
      );
      return data.groups.flatMap((g) => g.rules);
    },
    stop,
  };
}
