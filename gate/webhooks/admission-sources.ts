// What the admission webhooks read, and when they refuse instead: the caches while they can be
// trusted, the apiserver where a cache cannot tell (a namespace it has not seen), and a retryable
// refusal where neither can answer. Never "out of scope" for a namespace it could not read: that
// would admit a Revision unheld.
import { errorLine } from '../../api/kube-errors.ts';
import type { GateConfig } from '../config.ts';
import { labelSelectorMatches } from '../core/match.ts';
import type { RequestObserver } from '../kube/apiserver-agent-pool.ts';
import { type Caches, cacheProblems } from '../kube/caches.ts';
import { KubeClient, withRequestTimeout } from '../kube/kube-client.ts';
import { type AdmissionSources, RetryLater } from './admission.ts';
import { parseLabelSelector } from './label-selector.ts';

/** The apiserver waits 5 s for a webhook (webhook-configuration.ts): a live read must end well before. */
const WEBHOOK_READ_TIMEOUT_MS = 3_000;

/** `watchFailureMs`: how long an informer may fail before its cache is no longer trusted. */
export function admissionSources(
  config: Pick<GateConfig, 'kubeConfig' | 'namespaceSelector'>,
  caches: Caches,
  watchFailureMs: number,
  observeRequest: RequestObserver,
): AdmissionSources {
  const reads = new KubeClient(withRequestTimeout(config.kubeConfig, WEBHOOK_READ_TIMEOUT_MS, observeRequest));
  const selector = config.namespaceSelector === undefined ? undefined : parseLabelSelector(config.namespaceSelector);
  const trouble = (name: string) =>
    cacheProblems(
      caches.health().filter((h) => h.name === name),
      Date.now(),
      watchFailureMs,
    );
  return {
    hooks: (namespace) => {
      const problems = [...trouble('prestarthooks'), ...trouble('namespacedprestarthooks')];
      if (problems.length > 0) throw new RetryLater(`the gate does not know the PrestartHooks yet (${problems.join('; ')})`);
      return caches.catalog.forNamespace(namespace);
    },
    namespaceLabels: async (ns) => {
      const cached = caches.namespaces.get(ns);
      if (cached && trouble('namespaces').length === 0) return cached.metadata?.labels ?? {};
      // Not in the cache (created a moment ago, or while the namespaces watch is down): ask.
      let live: Awaited<ReturnType<KubeClient['getNamespace']>>;
      try {
        live = await reads.getNamespace(ns);
      } catch (err) {
        throw new RetryLater(`the gate could not read namespace ${ns} to tell whether its Revisions are held (${errorLine(err)})`);
      }
      if (!live) throw new RetryLater(`namespace ${ns} was not found`);
      const labels = live.metadata?.labels ?? {};
      return selector === undefined || labelSelectorMatches(selector, labels) ? labels : undefined;
    },
    run: async (ns, name) => {
      const cached = caches.runs.get(name, ns);
      if (cached) return cached;
      try {
        return await reads.getRun(ns, name);
      } catch (err) {
        throw new RetryLater(`the gate could not read PrestartRun ${ns}/${name} (${errorLine(err)})`);
      }
    },
  };
}
