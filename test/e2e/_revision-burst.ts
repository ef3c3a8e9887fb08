// A burst of Revision creations during a disruption of the gate, and what a user then checks:
// every create was admitted (or refused, and by whom), every Revision was held, its hook asked,
// and it was released exactly once, after its hook answered.
//
// The creator here is the test: it creates the Revisions directly, in place of Knative's
// Configuration reconciler, so it retries a refused create itself, as that reconciler does (its
// work queue requeues with a backoff from 5 ms, doubling).
// The hook is the release's built-in secret hook (a pod): it answers once the Secret it waits for
// exists, and the test creates each Secret only after the hook said, through the PrestartRun, that
// it is waiting for it. So "released before its hook answered" is seen from outside the gate: a
// Revision whose hold is lifted before its Secret was sent.

import { kubeRequest, statusMessage } from '@knative-prestart/devcluster/kube-request.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoreV1Api, type KubeConfig, Watch } from '@kubernetes/client-node';
import { REVISIONS, type Resource, RUNS } from '../../api/resources.ts';
import { HOLD_LABEL } from '../../api/types.ts';

export interface Refusal {
  name: string;
  /** ms since the epoch. */
  at: number;
  status: number;
  message: string;
}

export interface BurstResult {
  refused: Refusal[];
  /** Names whose create (or its retry) came back without the hold label: admitted unheld. */
  admittedUnheld: string[];
  startedAt: number;
  endedAt: number;
  disruption: { startedAt: number; endedAt: number };
  /** Creates answered between the disruption's start and end: a burst that missed it proves nothing. */
  answeredDuringDisruption: number;
}

export interface BurstOptions {
  kc: KubeConfig;
  namespace: string;
  names: string[];
  /** Creates in flight at most at once (Knative's reconciler workers). */
  clients: number;
  /** Create number i starts no earlier than i x this after the start: the shape of the load, so the burst spans the disruption. */
  spacingMs: number;
  body(name: string): object;
  /** Started once this many creates were answered; its promise ends when the gate has recovered. */
  disruptAfter: number;
  disrupt(): Promise<void>;
}

/** Retries per Revision before the burst gives up on it (Knative retries for as long as it takes; a test may not). */
const MAX_ATTEMPTS = 20;

/**
 * Creates one Revision as Knative's Configuration reconciler does: a refused create is retried
 * (each refusal recorded in `refused`) until it is admitted; a 409 means an earlier try got in.
 */
export async function createLikeKnative(
  kc: KubeConfig,
  namespace: string,
  name: string,
  body: object,
  refused: Refusal[],
): Promise<'held' | 'unheld' | 'existed'> {
  const path = `/apis/${REVISIONS.group}/${REVISIONS.version}/namespaces/${namespace}/${REVISIONS.plural}`;
  for (let attempt = 1; ; attempt++) {
    const res = await kubeRequest(kc, 'POST', path, body).catch((err: Error) => ({
      status: 0,
      body: { message: err.message },
    }));
    if (res.status === 201) {
      const labels = (res.body as { metadata?: { labels?: Record<string, string> } }).metadata?.labels ?? {};
      return labels[HOLD_LABEL] === 'true' ? 'held' : 'unheld';
    }
    // Created after all (the answer was lost): Knative would find it in its lister and go on.
    if (res.status === 409) return 'existed';
    refused.push({ name, at: Date.now(), status: res.status, message: statusMessage(res).slice(0, 300) });
    if (attempt >= MAX_ATTEMPTS) throw new Error(`${name}: refused ${attempt} times, last: ${statusMessage(res)}`);
    await new Promise((resolve) => setTimeout(resolve, Math.min(5 * 2 ** (attempt - 1), 2000)));
  }
}

export async function burst(o: BurstOptions): Promise<BurstResult> {
  const refused: Refusal[] = [];
  const admittedUnheld: string[] = [];
  const answeredAt: number[] = [];
  const startedAt = Date.now();
  let disruption: Promise<{ startedAt: number; endedAt: number }> | undefined;
  let next = 0;
  const create = async (name: string): Promise<void> => {
    const res = await createLikeKnative(o.kc, o.namespace, name, o.body(name), refused);
    if (res === 'unheld') admittedUnheld.push(name);
  };
  const client = async () => {
    for (;;) {
      const i = next++;
      const name = o.names[i];
      if (name === undefined) return;
      const due = startedAt + i * o.spacingMs - Date.now();
      if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
      await create(name);
      answeredAt.push(Date.now());
      if (answeredAt.length === o.disruptAfter) {
        const begun = Date.now();
        disruption = o.disrupt().then(() => ({ startedAt: begun, endedAt: Date.now() }));
      }
    }
  };
  await Promise.all(Array.from({ length: o.clients }, client));
  const endedAt = Date.now();
  if (!disruption) throw new Error(`the burst ended before ${o.disruptAfter} creates were answered`);
  const window = await disruption;
  return {
    refused,
    admittedUnheld,
    startedAt,
    endedAt,
    disruption: window,
    answeredDuringDisruption: answeredAt.filter((t) => t >= window.startedAt && t <= window.endedAt).length,
  };
}

interface Seen {
  /** Held→unheld transitions the watch saw. */
  releases: number;
  held?: boolean;
  firstUnheldAt?: number;
}

export interface ReleaseTracker {
  /** When the test sent the Secret the hook waits for, by Revision. */
  secretSentAt: Map<string, number>;
  seen: Map<string, Seen>;
  /** Waits until every one of `names` was seen released; throws naming those that were not. */
  waitAllReleased(names: string[], timeoutMs: number): Promise<number>;
  /** Names seen unheld before their Secret was sent (or with no Secret sent at all). */
  releasedEarly(names: string[]): string[];
  /** Names whose hook said it waits for the Secret. */
  waiting: Set<string>;
  /** Sends the Secret of every one of `names` (with `answer: 'later'`). */
  answer(names: string[]): Promise<void>;
  stop(): void;
}

/**
 * Watches the namespace's Revisions (their hold label) and PrestartRuns (the hook's progress), and
 * creates `<revision>-db` with key `uri` once the secret hook says it waits for it (`answer:
 * 'later'`: when the test calls answer()).
 */
export async function trackReleases(
  kc: KubeConfig,
  namespace: string,
  opts: { answer?: 'at-once' | 'later' } = {},
): Promise<ReleaseTracker> {
  const core = kc.makeApiClient(CoreV1Api);
  const secretSentAt = new Map<string, number>();
  const seen = new Map<string, Seen>();
  const waiting = new Set<string>();
  const errors: string[] = [];
  const aborts: { abort(): void }[] = [];
  let stopped = false;

  const onRevision = (obj: { metadata?: { name?: string; labels?: Record<string, string> } }) => {
    const name = obj.metadata?.name;
    if (!name) return;
    const s = seen.get(name) ?? { releases: 0 };
    const held = obj.metadata?.labels?.[HOLD_LABEL] === 'true';
    if (s.held === true && !held) s.releases++;
    if (!held) s.firstUnheldAt ??= Date.now();
    s.held = held;
    seen.set(name, s);
  };
  const sendSecret = async (name: string) => {
    secretSentAt.set(name, Date.now());
    for (let attempt = 1; attempt <= 5; attempt++) {
      try {
        await core.createNamespacedSecret({
          namespace,
          body: { metadata: { name: `${name}-db` }, stringData: { uri: `postgres://db/${name}` } },
        });
        return;
      } catch (err) {
        if ((err as { code?: number }).code === 409) return;
        if (attempt === 5) errors.push(`Secret ${name}-db: ${String(err).slice(0, 200)}`);
      }
    }
  };
  const onRun = (obj: { metadata?: { name?: string }; status?: { hooks?: { message?: string }[] } }) => {
    const name = obj.metadata?.name;
    if (!name || !(obj.status?.hooks?.[0]?.message ?? '').includes('does not exist yet')) return;
    waiting.add(name);
    if (opts.answer !== 'later' && !secretSentAt.has(name)) void sendSecret(name);
  };

  // A watch the apiserver ends (its timeout, a lost connection) is opened again from the last
  // version seen; an expired one (410) from a fresh list: the handlers judge each object as it is.
  const follow = async ({ group, version, plural }: Resource, handle: (obj: never) => void) => {
    let resourceVersion: string | undefined;
    const open = async (): Promise<void> => {
      if (stopped) return;
      const req = await new Watch(kc).watch(
        `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
        resourceVersion ? { resourceVersion, allowWatchBookmarks: true } : { allowWatchBookmarks: true },
        (type: string, obj: { metadata?: { resourceVersion?: string }; code?: number }) => {
          if (type === 'ERROR') {
            if (obj.code === 410) resourceVersion = undefined;
            return;
          }
          resourceVersion = obj.metadata?.resourceVersion ?? resourceVersion;
          if (type !== 'BOOKMARK' && type !== 'DELETED') handle(obj as never);
        },
        () => void open().catch((err) => errors.push(`watch ${plural}: ${String(err)}`)),
      );
      aborts.push(req);
    };
    await open();
  };
  await follow(REVISIONS, onRevision);
  await follow(RUNS, onRun);

  return {
    secretSentAt,
    seen,
    waiting,
    async answer(names) {
      await Promise.all(names.filter((n) => !secretSentAt.has(n)).map(sendSecret));
    },
    async waitAllReleased(names, timeoutMs) {
      return waitFor(
        () => {
          if (errors.length > 0) throw new Error(errors.join('; '));
          const waiting = names.filter((n) => seen.get(n)?.firstUnheldAt === undefined);
          if (waiting.length === 0) return Date.now();
          throw new Error(`${waiting.length} not released yet: ${waiting.slice(0, 5).join(', ')}`);
        },
        { what: `all ${names.length} Revisions released`, timeoutMs, intervalMs: 250 },
      );
    },
    releasedEarly(names) {
      return names.filter((n) => {
        const unheld = seen.get(n)?.firstUnheldAt;
        const sent = secretSentAt.get(n);
        return unheld !== undefined && (sent === undefined || unheld < sent);
      });
    },
    stop() {
      stopped = true;
      for (const a of aborts) a.abort();
    },
  };
}
