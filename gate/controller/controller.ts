// The imperative shell around the core: observe one Revision from the caches, ask `decide` what
// to do, apply the actions in the order given, and requeue. Nothing here makes a decision.
//
// What it looks at: the held Revisions (the Revisions cache holds only those), and an unheld one
// only when something may be left to do for it, read live then: a run not finished (decide rule
// 4 finishes a release interrupted between the label and the status write; the observer counts a
// hold someone else lifted), the gate's finalizer still on it (rules 1 and 2), or a last
// reconcile that failed part-way. Siblings and held Revisions come from indexes, never a scan.
import type { Logger } from 'pino';
import { errorLine, isConflict } from '../../api/kube-errors.ts';
import {
  configurationGeneration,
  keyOf,
  type RevisionObject,
  type RunObject,
  splitKey,
  toRevisionView,
  toRunView,
} from '../../api/resources.ts';
import { HOLD_LABEL, type PrestartHook } from '../../api/types.ts';
import { decideRevision, idRunUID } from '../core/index.ts';
import type { Observed } from '../core/types.ts';
import type { ReplyRecorder } from '../delivery/reply-recorder.ts';
import { HookSends, type SendLimits } from '../delivery/send-queue.ts';
import { CONFIGURATION_LABEL, isFinished } from '../kube/cache-views.ts';
import type { Caches } from '../kube/caches.ts';
import { isNewerVersion } from '../kube/written-runs.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { type ApplyContext, type ApplyDeps, applyActions } from './apply.ts';
import { BackgroundWrites } from './background-writes.ts';
import { WorkQueue } from './workqueue.ts';

export interface ControllerOptions {
  caches: Caches;
  /** The writer, the sender, the intake and the gate's one clock. */
  apply: ApplyDeps;
  log: Logger;
  metrics: Metrics;
  workers: number;
  /** How often every Revision in the cache is reconciled again, events or not (GateConfig.resyncSeconds); 0: never. */
  resyncMs: number;
  /** Sends in flight per hook and in all (gate/delivery/send-queue.ts); default DEFAULT_SEND_LIMITS. */
  sendLimits?: SendLimits;
  /** Where replies are stored (gate/delivery/reply-recorder.ts): each stored reply wakes its Revision at once. */
  replies?: Pick<ReplyRecorder, 'onRecorded'>;
}

/** How soon a held Revision whose namespace the cache does not know yet is looked at again. */
const NAMESPACE_UNKNOWN_RETRY_MS = 30_000;
/** How long the bookkeeping after a release waits behind the releases themselves. */
const BOOKKEEPING_DELAY_MS = 1_000;

type Keyed = { metadata?: { namespace?: string; name?: string } };

/**
 * One per gate process: its informer handlers are registered once, and each term of leadership
 * runs a queue and workers of its own (startTerm/endTerm), so leadership flaps leave nothing behind.
 */
export class Controller {
  /** The current term's queue; undefined while not leading (events are then ignored). */
  private queue: WorkQueue | undefined;
  /** The workers of the current (or last) term; a new term waits for the last one's. */
  private workers: Promise<void> = Promise.resolve();
  private resync: NodeJS.Timeout | undefined;
  /** Ends the wait of a term that stops before the controller's caches have listed. */
  private cancelLeadWait: () => void = () => undefined;
  /** When the current term began: Observed.leaderSince. */
  private leaderSince: Date | undefined;
  /** Keys whose last reconcile failed: the next one reads the Revision live if it is no longer held. */
  private readonly failed = new Set<string>();
  /**
   * Revisions this replica released, by the resourceVersion the release gave them: until the watch
   * brings the released Revision, the held cache shows an older one, and a reconcile woken by the
   * run's own watch event would release it again (a refused patch and a backoff).
   */
  private readonly released = new Map<string, string>();
  /** Sends off the workers, at most a few per hook at once. */
  readonly sends: HookSends;
  /** Events and conditions, off the workers. */
  readonly background = new BackgroundWrites();

  constructor(private readonly opts: ControllerOptions) {
    const { caches, apply, log } = opts;
    this.sends = new HookSends({ sender: apply.sender, intake: apply.intake, log, limits: opts.sendLimits });
    const enqueue = (obj: Keyed) => this.queue?.add(keyOf(obj));
    opts.replies?.onRecorded((namespace, name) => this.wake(namespace, name));
    caches.revisions.on('add', enqueue);
    caches.revisions.on('update', enqueue);
    // A Revision leaves the held cache when its hold comes off: what is left (the run's Released
    // status, the event, decide's finishInterruptedRelease) is bookkeeping, done a moment later so that releases
    // arriving together are not queued behind each other's (gate/controller/apply.ts).
    caches.revisions.on('delete', (rev) => {
      this.released.delete(keyOf(rev));
      this.queue?.addAfter(keyOf(rev), BOOKKEEPING_DELAY_MS);
    });
    // A new Revision may supersede held ones of its Configuration; an unheld one carrying the
    // gate's finalizer (its hold lifted by hand) needs it removed when it is deleted.
    caches.revisionStubs.on('add', (stub) => {
      this.enqueueHeldSiblings(stub.metadata?.namespace, stub.metadata?.labels?.[CONFIGURATION_LABEL]);
      this.enqueueUnheldWithFinalizer(stub);
    });
    caches.revisionStubs.on('update', (stub) => this.enqueueUnheldWithFinalizer(stub));
    // A run is named after its Revision: a reply written by any replica wakes the leader, and a
    // deleted run (`kubectl delete prestartrun`, which the hold reason suggests) starts over.
    for (const verb of ['add', 'update', 'delete'] as const) caches.runs.on(verb, enqueue);
    caches.routes.on('update', (route) => this.enqueueHeldIn(route.metadata?.namespace));
    caches.routes.on('add', (route) => this.enqueueHeldIn(route.metadata?.namespace));
    // Revisions held in a namespace the cache learns of only now (created together with it, or
    // while the namespaces watch was down) waited for this.
    caches.namespaces.on('add', (ns) => this.enqueueHeldIn(ns.metadata?.name));
  }

  /**
   * Starts a term: workers run until endTerm() or stop(). Call only while leading. The first term
   * of a process lists the Revisions and Routes first (caches.lead()); only a leader keeps them.
   */
  startTerm(): void {
    if (this.queue) return;
    const queue = new WorkQueue();
    // Events and conditions wait while something that happened waits to be decided (background-writes.ts).
    queue.onBusy = (busy) => this.background.foreground(busy);
    this.queue = queue;
    this.opts.metrics.startTerm(queue);
    // A deadline that came before this term began came while no leader acted (advanceRun's deadlines step, resend.ts).
    this.leaderSince = this.opts.apply.clock.now();
    const ended = new Promise<void>((resolve) => {
      this.cancelLeadWait = resolve;
    });
    // The last term's workers finish their current key first: no key is ever reconciled twice at once.
    this.workers = this.workers.then(async () => {
      await Promise.race([this.opts.caches.lead(), ended]);
      if (this.queue !== queue) return;
      this.enqueueAll();
      // Like the resync of Knative's controllers: an event the informers never delivered, or one
      // whose reconcile gave up, cannot strand a held Revision for longer than one period.
      if (this.opts.resyncMs > 0) {
        this.resync = setInterval(() => this.enqueueAll(), this.opts.resyncMs);
        this.resync.unref();
      }
      await Promise.all(Array.from({ length: this.opts.workers }, () => this.work(queue)));
    });
  }

  /** Looks at a Revision now (a reply was just stored); nothing while not leading. */
  wake(namespace: string, name: string): void {
    this.queue?.add(`${namespace}/${name}`);
  }

  /** True during a term (between startTerm and its end): the controller acts. */
  get active(): boolean {
    return this.queue !== undefined;
  }

  /** Ends the term without waiting for its workers (the lease is lost: stop acting now). */
  endTerm(): void {
    void this.stop();
  }

  /** Ends the term; resolves when its workers have finished their current keys. What waits to be sent is dropped. */
  async stop(): Promise<void> {
    clearInterval(this.resync);
    this.queue?.shutdown();
    this.queue = undefined;
    this.cancelLeadWait();
    this.sends.clear();
    this.background.clear();
    await this.workers;
  }

  private async work(queue: WorkQueue): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const t0 = performance.now();
      try {
        const requeueAfterMs = await this.reconcile(key);
        queue.forget(key);
        this.failed.delete(key);
        if (requeueAfterMs !== undefined) queue.addAfter(key, requeueAfterMs);
        this.opts.metrics.reconciles.inc({ result: 'ok' });
      } catch (err) {
        // A conflict only means someone wrote first (a reply, another replica): decide again.
        const level = isConflict(err) ? 'debug' : 'warn';
        this.opts.log[level]({ err: errorLine(err), key }, 'reconcile failed; retrying with backoff');
        this.opts.metrics.reconciles.inc({ result: 'error' });
        this.failed.add(key);
        queue.addRateLimited(key);
      } finally {
        this.opts.metrics.reconcileSeconds.observe((performance.now() - t0) / 1000);
        queue.done(key);
      }
    }
  }

  /** Returns when to look again, if the core asked for it. */
  async reconcile(key: string): Promise<number | undefined> {
    const { namespace, name } = splitKey(key);
    const { caches } = this.opts;
    // The run as this replica last wrote it, when the informer has not brought that yet.
    const runObj = caches.written.get(namespace, name);
    const held = caches.revisions.get(name, namespace);
    const releasedAs = this.released.get(key);
    if (releasedAs !== undefined) {
      if (held && !isNewerVersion(held.metadata?.resourceVersion, releasedAs)) return undefined;
      this.released.delete(key);
    }
    const revObj = held ?? (await this.unheldToLookAt(key, runObj));
    if (!revObj) {
      // Released or cancelled, unheld, nothing left: nothing more to send, nothing more to count.
      this.sends.forget(namespace, name);
      if (runObj?.spec?.revisionUID && isFinished(runObj)) this.opts.metrics.observer.forget(runObj.spec.revisionUID);
      return undefined;
    }
    if (!caches.namespaces.get(namespace)) {
      // Not (yet) a namespace of this gate's: a held Revision there may be ours, stamped before the
      // namespace reached the cache. The namespace's add event wakes it; this is the safety net.
      return revObj.metadata?.labels?.[HOLD_LABEL] === 'true' ? NAMESPACE_UNKNOWN_RETRY_MS : undefined;
    }
    const revision = toRevisionView(revObj);
    const supersededBy = this.newerSibling(revObj);
    const run = runObj ? toRunView(runObj) : undefined;
    const observed: Observed = {
      revision,
      hooks: this.hooksByName(namespace),
      run,
      supersededBy,
      namedByTraffic: supersededBy !== undefined && this.namedByTraffic(namespace, name),
      now: this.opts.apply.clock.now(),
      leaderSince: this.leaderSince,
      sent: run ? this.sends.sentFor(namespace, name, idRunUID(run)) : undefined,
    };
    // decide(), then the gate's condition on the Revision for kn's view.
    const decision = decideRevision(observed);
    this.opts.metrics.observer.reconciled(observed, decision);
    if (decision.actions.length > 0) {
      this.opts.log.debug({ key, actions: decision.actions.map((a) => a.type) }, 'applying');
      const ctx: ApplyContext = {
        ...this.opts.apply,
        revision,
        revisionResourceVersion: revObj.metadata?.resourceVersion,
        run: runObj,
        log: this.opts.log,
        sends: this.sends,
        background: this.background,
        retry: () => this.queue?.addRateLimited(key),
      };
      await applyActions(decision.actions, ctx);
      if (ctx.releasedAs !== undefined) this.released.set(key, ctx.releasedAs);
    }
    return decision.requeueAfterMs;
  }

  /**
   * A Revision not in the held cache, read live when something may be left to do for it (see the
   * top of this file); undefined when nothing is (most Revisions: released long ago, or never held).
   */
  private async unheldToLookAt(key: string, runObj: RunObject | undefined): Promise<RevisionObject | undefined> {
    const { namespace, name } = splitKey(key);
    const look =
      (runObj !== undefined && !isFinished(runObj)) || this.opts.caches.revisionIndex.hasFinalizer(namespace, name) || this.failed.has(key);
    if (!look) return undefined;
    return this.opts.apply.client.getRevision(namespace, name);
  }

  /** Every PrestartHook and this namespace's NamespacedPrestartHooks: another namespace's are never found here. */
  private hooksByName(namespace: string): Map<string, PrestartHook> {
    return new Map(this.opts.caches.catalog.forNamespace(namespace).map((h) => [h.name, h]));
  }

  private newerSibling(rev: RevisionObject): string | undefined {
    const configuration = rev.metadata?.labels?.[CONFIGURATION_LABEL];
    if (!configuration) return undefined;
    return this.opts.caches.revisionIndex.newer(rev.metadata?.namespace ?? '', configuration, configurationGeneration(rev))?.name;
  }

  private namedByTraffic(namespace: string, name: string): boolean {
    return this.opts.caches.routes.list(namespace).some((route) => (route.spec?.traffic ?? []).some((t) => t.revisionName === name));
  }

  /** Every held Revision, every unfinished run's Revision, every Revision with the gate's finalizer. */
  private enqueueAll(): void {
    const queue = this.queue;
    if (!queue) return;
    const { caches } = this.opts;
    // The timers' lane (workqueue.ts): a resync of everything must not queue what just happened behind it.
    const look = (key: string) => queue.addAfter(key, 0);
    for (const rev of caches.revisions.list()) look(keyOf(rev));
    for (const run of caches.runs.list()) if (!isFinished(run)) look(keyOf(run));
    for (const key of caches.revisionIndex.withFinalizer()) look(key);
  }

  private enqueueHeldIn(namespace: string | undefined): void {
    const queue = this.queue;
    if (!queue || !namespace) return;
    // The Revisions cache holds the held ones only.
    for (const rev of this.opts.caches.revisions.list(namespace)) queue.add(keyOf(rev));
  }

  private enqueueHeldSiblings(namespace: string | undefined, configuration: string | undefined): void {
    const queue = this.queue;
    if (!queue || !namespace || !configuration) return;
    const { caches } = this.opts;
    for (const name of caches.revisionIndex.siblings(namespace, configuration)) {
      if (caches.revisions.get(name, namespace)) queue.add(`${namespace}/${name}`);
    }
  }

  private enqueueUnheldWithFinalizer(stub: Keyed & { metadata?: { finalizers?: string[] } }): void {
    const md = stub.metadata;
    if (!this.queue || !md?.finalizers?.length || this.opts.caches.revisions.get(md.name ?? '', md.namespace)) return;
    this.queue.add(keyOf(stub));
  }
}
