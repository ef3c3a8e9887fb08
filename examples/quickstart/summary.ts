// What the quickstart prints once the demo is through: the time each phase took, and how to look
// around in the cluster it leaves running (ready-to-paste commands with the cached kubectl).
import { dirname } from 'node:path';

export const PHASES = ['binaries', 'control plane', 'Knative', 'gate', 'demo'] as const;
export type Phase = (typeof PHASES)[number];

/** Start and end of each phase, in performance.now() milliseconds. */
export class PhaseClock {
  private readonly spans = new Map<Phase, { start: number; end?: number }>();

  start(phase: Phase, now = performance.now()): void {
    this.spans.set(phase, { start: now });
  }

  end(phase: Phase, now = performance.now()): number {
    const span = this.spans.get(phase);
    if (!span) return 0;
    span.end = now;
    return span.end - span.start;
  }

  /** "binaries 0.4s, control plane 5.1s, ...; total 41.2s": phases not run are left out. */
  summary(now = performance.now()): string {
    const parts: string[] = [];
    let first: number | undefined;
    for (const phase of PHASES) {
      const span = this.spans.get(phase);
      if (!span) continue;
      first ??= span.start;
      parts.push(`${phase} ${seconds((span.end ?? now) - span.start)}${span.end === undefined ? ' (unfinished)' : ''}`);
    }
    return parts.length === 0 ? 'none' : `${parts.join(', ')}; total ${seconds(now - (first ?? now))}`;
  }
}

export function seconds(ms: number): string {
  return ms >= 120_000
    ? `${Math.floor(ms / 60_000)}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s`
    : `${(ms / 1000).toFixed(1)}s`;
}

export interface LookAround {
  kubeconfig: string;
  kubectl: string;
  clusterDir: string;
  namespace: string;
  service: string;
  revision: string;
  hook: string;
  logs: string[];
  /** `--broker`: the Broker's namespace has the gate's Triggers to show. */
  broker?: boolean;
}

/** Shell-quotes a path only when it needs it, so the common case stays easy to read. */
function sh(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", `'\\''`)}'`;
}

export function lookAround(l: LookAround): string[] {
  const ns = `-n ${l.namespace}`;
  return [
    'Look around (everything keeps running until Ctrl-C):',
    `  export KUBECONFIG=${sh(l.kubeconfig)}`,
    `  export PATH=${sh(dirname(l.kubectl))}:"$PATH"    # the cached kubectl: ${l.kubectl}`,
    '  kubectl get prestarthooks',
    `  kubectl get prestartrun ${ns}`,
    ...(l.broker ? [`  kubectl get brokers,triggers ${ns}        # the hook bus: the gate's request and reply Triggers`] : []),
    `  kubectl describe revision ${l.revision} ${ns}        # events: Knative's retries carry the hold message`,
    `  kubectl get ksvc ${ns}`,
    `  kubectl get pods ${ns} -o jsonpath='{.items[0].spec.containers[0].env}'    # the binding`,
    'A new Revision, held again while the hook runs (the view below logs it):',
    `  kubectl patch ksvc ${l.service} ${ns} --type merge -p '{"spec":{"template":{"metadata":{"annotations":{"demo/rollout":"2"}}}}}'`,
    'A failing hook: after this, a new Revision (the patch above with "3") stays held, and its events say why and how to retry:',
    `  kubectl patch prestarthook ${l.hook} --type merge -p '{"spec":{"params":{"fail":true}}}'`,
    `Logs: ${l.logs.join(', ')}`,
    `Cluster directory (removed on exit): ${l.clusterDir}`,
  ];
}
