// Post-release image drift, the shell: on the leader, whenever a pod of a Revision changes (its
// kubelet reports what each container runs) or a run is released, compare the pods of each
// released hooked Revision with the digests its hooks approved (gate/core/drift.ts). A finding
// not told before gets a Warning Event on the Revision and a line in its run's status.imageDrift
// (which `kn prestart why` prints); the gauge counts the containers drifted now. Told once per
// (pod, container, running digest): the leader remembers what it told this term, and what a run
// records is never told again by the next leader. A failed write is logged; nothing else waits on it.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine } from '../../api/kube-errors.ts';
import type { RunObject } from '../../api/resources.ts';
import { type DriftFinding, driftMessage, findingKey, imageDrift, newDrift, type PodImages, REASON_IMAGE_DRIFT } from '../core/drift.ts';
import { type PodObject, REVISION_LABEL, REVISION_UID_LABEL } from '../kube/cache-views.ts';
import type { KubeClient } from '../kube/kube-client.ts';
import type { Clock } from '../runtime/clock.ts';
import { ObjectLocks } from '../runtime/object-locks.ts';
import { tellFinding } from './subject-access.ts';

/** prestart_gate_image_drift: containers of one Revision's pods drifted now. */
export interface DriftGauge {
  namespace: string;
  revision: string;
  value: number;
}

export interface ImageDriftWatchOptions {
  /** The Revisions' pods in a namespace (in all without one), as the leader's informer has them (caches.pods). */
  pods: (namespace?: string) => readonly PodObject[];
  /** A Revision's run, the newest copy this replica knows (caches.written). */
  run: (namespace: string, name: string) => RunObject | undefined;
  /** The namespaces this gate serves (its namespace selector): other gates' Revisions are theirs. */
  inScope: (namespace: string) => boolean;
  client: KubeClient;
  core: CoreV1Api;
  clock: Clock;
  log: Logger;
}

export interface ImageDriftWatch {
  /** A pod was added, changed or deleted: its Revision is looked at again. */
  podChanged(pod: PodObject): void;
  /** A run changed (released, say): its Revision is looked at again. */
  runChanged(run: RunObject): void;
  /** Every Revision with a pod in the cache (the start of a term). */
  checkAll(): void;
  /** The gauge's values now. */
  gauges(): readonly DriftGauge[];
  /** Resolves once the checks under way have ended; nothing is checked after. */
  stop(): Promise<void>;
}

export function startImageDriftWatch(opts: ImageDriftWatchOptions): ImageDriftWatch {
  const log = opts.log.child({ component: 'image-drift' });
  const locks = new ObjectLocks();
  /** Per Revision (namespace/name): the findings told this term (findingKey). */
  const told = new Map<string, Set<string>>();
  const drifted = new Map<string, DriftGauge>();
  const running = new Set<Promise<void>>();
  let stopped = false;

  const check = (namespace: string | undefined, revision: string | undefined): void => {
    if (stopped || !namespace || !revision) return;
    const key = `${namespace}/${revision}`;
    const done = locks
      .exclusive(key, () => checkRevision(namespace, revision, key))
      .catch((err: unknown) => log.warn({ err: errorLine(err), revision: key }, 'image drift check failed'));
    running.add(done);
    void done.finally(() => running.delete(done));
  };

  const checkRevision = async (namespace: string, revision: string, key: string): Promise<void> => {
    if (stopped) return;
    const run = opts.run(namespace, revision);
    const approved = run?.spec?.containers;
    // Only a released run's containers were approved; a run made by a release older than
    // spec.containers approved no digest, so nothing can drift from it.
    if (!opts.inScope(namespace) || run?.status?.phase !== 'Released' || !approved) {
      drifted.delete(key);
      return;
    }
    const uid = run.spec.revisionUID;
    const pods = opts.pods(namespace).filter((p) => p.metadata?.labels?.[REVISION_UID_LABEL] === uid);
    const findings = imageDrift(approved, pods.map(podImages));
    if (findings.length > 0) drifted.set(key, { namespace, revision, value: findings.length });
    else drifted.delete(key);

    const mine = told.get(key) ?? new Set<string>();
    told.set(key, mine);
    const recorded = run.status.imageDrift ?? [];
    const { fresh, record } = newDrift(findings, mine, recorded, opts.clock.now());
    if (fresh.length === 0) return;
    for (const f of fresh) mine.add(findingKey(f));
    for (const f of fresh) await tell(namespace, revision, uid, f);
    if (record.length === recorded.length) return;
    await opts.client
      .recordRunDrift(namespace, revision, record)
      .catch((err: unknown) => log.warn({ err: errorLine(err), revision: key }, 'could not record the image drift on the run'));
  };

  const tell = (namespace: string, revision: string, uid: string, f: DriftFinding): Promise<void> =>
    tellFinding(
      opts.core,
      log,
      {
        namespace,
        involvedObject: { apiVersion: 'serving.knative.dev/v1', kind: 'Revision', name: revision, namespace, uid },
        type: 'Warning',
        reason: REASON_IMAGE_DRIFT,
        message: driftMessage(f),
      },
      { revision: `${namespace}/${revision}`, pod: f.pod, container: f.container, expected: f.expected, running: f.running },
    );

  const revisionOf = (pod: PodObject) => pod.metadata?.labels?.[REVISION_LABEL];
  return {
    podChanged: (pod) => check(pod.metadata?.namespace, revisionOf(pod)),
    runChanged: (run) => check(run.metadata?.namespace, run.metadata?.name),
    checkAll() {
      // The pods of one Revision share a key; each is looked at once.
      const seen = new Set<string>();
      for (const pod of opts.pods()) {
        const key = `${pod.metadata?.namespace}/${revisionOf(pod)}`;
        if (seen.has(key)) continue;
        seen.add(key);
        check(pod.metadata?.namespace, revisionOf(pod));
      }
    },
    gauges: () => [...drifted.values()],
    async stop() {
      stopped = true;
      await Promise.all(running);
      drifted.clear();
    },
  };
}

function podImages(pod: PodObject): PodImages {
  return {
    name: pod.metadata?.name ?? '',
    containers: [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])],
  };
}
