// Who may open a shell in a hooked namespace's pods, the shell: on the leader, at the start of its
// term, soon after a namespace gets its first PrestartRun and every few minutes (bindings change
// without telling the gate), list each hooked namespace's RoleBindings and the
// ClusterRoleBindings, ask the authorizer about each candidate (gate/core/pod-shell.ts), keep the
// gauge's values and record an Event in each namespace whose finding appeared, changed or went
// away. A failed check is logged and reported as -1; it never stops anything else.
import { AuthorizationV1Api, CoreV1Api, type KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { PLATFORM_NAMESPACES } from '../core/broker-namespace.ts';
import { hookedNamespaces, POD_SHELL, type ShellGauge, shellCandidates, shellReport } from '../core/pod-shell.ts';
import { startPeriodicPass } from './periodic-pass.ts';
import { tellFinding, whoMayIn } from './subject-access.ts';

/** How often the leader looks again without being asked (docs/operations.md). */
export const SHELL_CHECK_PERIOD_MS = 5 * 60_000;
/** Runs come in bursts (the informer's first list, a rollout of many Services): one pass for all. */
const RUNS_CHANGED_DELAY_MS = 1_000;

export interface PodShellCheckOptions {
  kc: KubeConfig;
  /** The namespaces of the PrestartRuns the gate's informer has. */
  runNamespaces: () => Iterable<string>;
  /** The gate's namespace: its ServiceAccounts are the gate's, never reported. */
  gateNamespace: string;
  periodMs?: number;
  log: Logger;
}

export interface PodShellCheck {
  /** A PrestartRun appeared: a pass follows shortly if its namespace is new. */
  runAdded(namespace: string): void;
  checkNow(): Promise<void>;
  gauges(): readonly ShellGauge[];
  stop(): Promise<void>;
}

export function startPodShellCheck(opts: PodShellCheckOptions): PodShellCheck {
  const log = opts.log.child({ component: 'pod-shell' });
  const rbac = opts.kc.makeApiClient(RbacAuthorizationV1Api);
  const authz = opts.kc.makeApiClient(AuthorizationV1Api);
  const core = opts.kc.makeApiClient(CoreV1Api);
  const trusted = [opts.gateNamespace, ...PLATFORM_NAMESPACES];
  let told = new Map<string, string>();
  let gauges: readonly ShellGauge[] = [];

  const pass = async (stopped: () => boolean): Promise<void> => {
    const namespaces = hookedNamespaces(opts.runNamespaces());
    const verdicts = await whoMayIn(namespaces, {
      rbac,
      authz,
      candidates: (namespace, bindings) => shellCandidates(namespace, bindings, trusted),
      attrs: POD_SHELL,
      stopped,
      log,
      doing: "exec into a hooked namespace's pods",
    });
    if (!verdicts) return;
    const report = shellReport(namespaces, verdicts, told);
    told = report.told;
    gauges = report.gauges;
    for (const event of report.events) {
      // In the namespace itself, where its people look (`kubectl get events`). The apiserver wants
      // an Event's namespace to be its object's; a Namespace's own Events live in it.
      const involvedObject = { apiVersion: 'v1', kind: 'Namespace', name: event.namespace, namespace: event.namespace };
      await tellFinding(
        core,
        log,
        { namespace: event.namespace, involvedObject, type: event.type, reason: event.reason, message: event.message },
        {
          namespace: event.namespace,
        },
      );
    }
  };

  const passes = startPeriodicPass({
    pass,
    periodMs: opts.periodMs ?? SHELL_CHECK_PERIOD_MS,
    debounceMs: RUNS_CHANGED_DELAY_MS,
    log,
    what: 'pod shell check',
  });
  return {
    runAdded(namespace) {
      // A namespace already checked waits for the period: a run more changes nothing about who may exec.
      if (!told.has(namespace)) passes.poke();
    },
    checkNow: () => passes.runNow(),
    gauges: () => gauges,
    async stop() {
      await passes.stop();
      gauges = [];
    },
  };
}
