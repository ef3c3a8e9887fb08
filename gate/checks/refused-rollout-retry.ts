// Rollouts Knative was refused while the gate could not stamp, the shell (gate/core/refused-rollout.ts
// says why and what to write): on the leader, at the start of its term (the gate is back: its
// caches are synced and its webhook registered), when who stamps changes, and every few minutes,
// list the Configurations, and for each one in this gate's namespaces whose Revision create was
// refused by us, annotate its latest Revision so that Knative tries again now. A pass that asked
// for a retry looks again shortly after, in case the retry raced the apiserver loading the webhook
// configuration; a Configuration is asked at most MAX_ASKS times while it stays refused, so one
// refused for good costs a few writes, not a loop.
import type { Logger } from 'pino';
import { CONFIGURATIONS, type ConfigurationObject } from '../../api/resources.ts';
import { RETRY_CREATE_ANNOTATION, retryTarget } from '../core/refused-rollout.ts';
import type { KubeClient } from '../kube/kube-client.ts';
import type { Clock } from '../runtime/clock.ts';
import { type PeriodicPass, startPeriodicPass } from './periodic-pass.ts';

export const REFUSED_CHECK_PERIOD_MS = 5 * 60_000;
/** Long enough for Knative's retry to land and its Configuration status to say so. */
const LOOK_AGAIN_MS = 3_000;
const MAX_ASKS = 5;
const PAGE = 500;

export interface RefusedRolloutsOptions {
  client: KubeClient;
  /** Whether a namespace is this gate's to stamp (its namespace cache, narrowed by --namespace-selector). */
  inScope: (namespace: string) => boolean;
  clock: Clock;
  log: Logger;
  periodMs?: number;
}

export type RefusedRollouts = Pick<PeriodicPass, 'poke' | 'runNow' | 'stop'>;

export function startRefusedRollouts(opts: RefusedRolloutsOptions): RefusedRollouts {
  const log = opts.log.child({ component: 'refused-rollouts' });
  const asked = new Map<string, number>();
  let lookAgain = false;

  const pass = async (stopped: () => boolean): Promise<void> => {
    lookAgain = false;
    let cont: string | undefined;
    do {
      const page = (await opts.client.custom.listClusterCustomObject({
        group: CONFIGURATIONS.group,
        version: CONFIGURATIONS.version,
        plural: CONFIGURATIONS.plural,
        limit: PAGE,
        _continue: cont,
      })) as { items?: ConfigurationObject[]; metadata?: { continue?: string } };
      for (const configuration of page.items ?? []) {
        if (stopped()) return;
        await askAgain(configuration);
      }
      cont = page.metadata?.continue || undefined;
    } while (cont);
    if (lookAgain) periodic.poke();
  };

  const askAgain = async (configuration: ConfigurationObject): Promise<void> => {
    const key = `${configuration.metadata?.namespace}/${configuration.metadata?.name}`;
    const target = retryTarget(configuration);
    if (!target) {
      // Created since, or never refused: a later refusal may be asked about again.
      asked.delete(key);
      return;
    }
    if (!opts.inScope(target.namespace)) return;
    if (target.kind === 'no-revision') {
      if (!asked.has(key))
        log.info({ configuration: key }, "a refused first Revision: nothing to annotate, it waits for Knative's own retry");
      asked.set(key, MAX_ASKS);
      return;
    }
    const times = asked.get(key) ?? 0;
    if (times >= MAX_ASKS) return;
    asked.set(key, times + 1);
    try {
      await opts.client.mergePatchRevision(target.namespace, target.revision, {
        metadata: { annotations: { [RETRY_CREATE_ANNOTATION]: opts.clock.now().toISOString() } },
      });
      log.info(
        { configuration: key, revision: target.revision },
        'Knative was refused a Revision while the gate could not stamp it: asked it to try again now',
      );
      lookAgain = true;
    } catch (err) {
      log.warn({ err, configuration: key, revision: target.revision }, 'could not ask Knative to try a refused Revision again');
    }
  };

  const periodic = startPeriodicPass({
    pass,
    periodMs: opts.periodMs ?? REFUSED_CHECK_PERIOD_MS,
    debounceMs: LOOK_AGAIN_MS,
    log,
    what: 'the check for refused rollouts',
  });
  return periodic;
}
