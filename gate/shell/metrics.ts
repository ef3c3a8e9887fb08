// Prometheus metrics of one gate process, on its own registry so tests and benches can run
// several gates in one process.
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  reconciles: Counter<'result'>;
  reconcileSeconds: Histogram;
  requests: Counter<'transport' | 'action' | 'result'>;
  replies: Counter<'result' | 'outcome'>;
  admissions: Counter<'webhook' | 'result'>;
}

export function createMetrics(withDefaults = false): Metrics {
  const registry = new Registry();
  if (withDefaults) collectDefaultMetrics({ register: registry, prefix: 'prestart_gate_' });
  return {
    registry,
    reconciles: new Counter({
      name: 'prestart_gate_reconciles_total',
      help: 'Revision reconciles',
      labelNames: ['result'],
      registers: [registry],
    }),
    reconcileSeconds: new Histogram({
      name: 'prestart_gate_reconcile_seconds',
      help: 'Time to reconcile one Revision',
      buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 2, 10],
      registers: [registry],
    }),
    requests: new Counter({
      name: 'prestart_gate_requests_total',
      help: 'Requests and cancels sent to hooks',
      labelNames: ['transport', 'action', 'result'],
      registers: [registry],
    }),
    replies: new Counter({
      name: 'prestart_gate_replies_total',
      help: 'Completed replies received',
      labelNames: ['result', 'outcome'],
      registers: [registry],
    }),
    admissions: new Counter({
      name: 'prestart_gate_admissions_total',
      help: 'Admission reviews answered',
      labelNames: ['webhook', 'result'],
      registers: [registry],
    }),
  };
}
