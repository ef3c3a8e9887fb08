// Whose Trigger could read a Broker's requests, the shell: on the leader, at the
// start of its term, soon after a PrestartHook changes and every few minutes (bindings change
// without telling the gate), list the bindings of each Broker's namespace and the
// ClusterRoleBindings, ask the authorizer about each candidate (gate/core/broker-namespace.ts),
// keep the gauge's values and record an Event on each hook whose finding appeared, changed or
// went away. A failed check is logged and reported as -1; it never stops anything else.
import { AuthorizationV1Api, CoreV1Api, type KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type HookObject, toHook } from '../../api/resources.ts';
import { API_VERSION } from '../../api/types.ts';
import {
  type BrokerGauge,
  type BrokerUse,
  brokerReport,
  brokersInUse,
  candidateSubjects,
  type HookEvent,
  PLATFORM_NAMESPACES,
  TRIGGER_CREATE,
} from '../core/broker-namespace.ts';
import { startPeriodicPass } from './periodic-pass.ts';
import { tellFinding, whoMayIn } from './subject-access.ts';

/** How often the leader looks again without being asked (docs/brokers.md). */
export const BROKER_CHECK_PERIOD_MS = 5 * 60_000;
/** Hook events come in bursts (the informer's first list, `kubectl apply -f dir/`): one pass for all. */
const HOOKS_CHANGED_DELAY_MS = 1_000;
/** Events about cluster-scoped objects live here (client-go's recorder does the same). */
const EVENT_NAMESPACE = 'default';

export interface BrokerNamespaceCheckOptions {
  /** The gate's (timed, observed) configuration: every call here is one of the gate's apiserver calls. */
  kc: KubeConfig;
  /** The PrestartHooks as the gate's informer has them. */
  hooks: () => readonly HookObject[];
  /** The gate's namespace: its ServiceAccounts are the gate's, never reported. */
  gateNamespace: string;
  /** Only Brokers in these namespaces (the gate's Trigger scope); default every namespace. */
  namespaces?: readonly string[];
  periodMs?: number;
  log: Logger;
}

export interface BrokerNamespaceCheck {
  /** A PrestartHook was added, changed or deleted: a pass follows shortly. */
  hooksChanged(): void;
  /** A pass that starts after this call (passes never overlap). */
  checkNow(): Promise<void>;
  /** The gauge's values as of the last pass. */
  gauges(): readonly BrokerGauge[];
  stop(): Promise<void>;
}

export function startBrokerNamespaceCheck(opts: BrokerNamespaceCheckOptions): BrokerNamespaceCheck {
  const log = opts.log.child({ component: 'broker-namespaces' });
  const rbac = opts.kc.makeApiClient(RbacAuthorizationV1Api);
  const authz = opts.kc.makeApiClient(AuthorizationV1Api);
  const core = opts.kc.makeApiClient(CoreV1Api);
  const trusted = [opts.gateNamespace, ...PLATFORM_NAMESPACES];
  let told = new Map<string, string>();
  let gauges: readonly BrokerGauge[] = [];

  const pass = async (stopped: () => boolean): Promise<void> => {
    const uses: BrokerUse[] = brokersInUse(
      opts.hooks().map((h) => ({ ...toHook(h), uid: h.metadata?.uid ?? '' })),
      opts.namespaces,
    );
    const verdicts = await whoMayIn(
      uses.map((u) => u.namespace),
      {
        rbac,
        authz,
        candidates: (namespace, bindings) => candidateSubjects(namespace, bindings, trusted),
        attrs: [TRIGGER_CREATE],
        stopped,
        log,
        doing: "create Triggers in a Broker's namespace",
      },
    );
    if (!verdicts) return;
    const report = brokerReport(uses, verdicts, told);
    told = report.told;
    gauges = report.gauges;
    for (const event of report.events) {
      const fields = {
        hook: event.hook.name,
        ...(event.type === 'Warning' ? { broker: `${event.broker.namespace}/${event.broker.name}` } : {}),
      };
      await tellFinding(core, log, hookEvent(event), fields);
    }
  };

  const passes = startPeriodicPass({
    pass,
    periodMs: opts.periodMs ?? BROKER_CHECK_PERIOD_MS,
    debounceMs: HOOKS_CHANGED_DELAY_MS,
    log,
    what: 'Broker namespace check',
  });
  return {
    hooksChanged: () => passes.poke(),
    checkNow: () => passes.runNow(),
    gauges: () => gauges,
    async stop() {
      await passes.stop();
      gauges = [];
    },
  };
}

/** An Event on the PrestartHook: cluster-scoped, so in namespace default, where `kubectl describe` finds it. */
function hookEvent(event: HookEvent) {
  return {
    namespace: EVENT_NAMESPACE,
    involvedObject: { apiVersion: API_VERSION, kind: 'PrestartHook', name: event.hook.name, uid: event.hook.uid },
    type: event.type,
    reason: event.reason,
    message: event.message,
  };
}
