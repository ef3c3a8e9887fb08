// The imperative shell around the core: observe one Revision from the caches, ask `decide` what
// to do, apply the actions in the order given, and requeue. Nothing here makes a decision.
import type { Logger } from 'pino';
import { errorLine, isConflict } from '../../api/kube-errors.ts';
import { configurationGeneration, keyOf, splitKey, toHook, toRevisionView, toRunView } from '../../api/resources.ts';
import { HOLD_LABEL, type PrestartHook } from '../../api/types.ts';
import { decide } from '../core/index.ts';
import type { Observed } from '../core/types.ts';
import { type ApplyDeps, applyActions } from './apply.ts';
import type { Caches } from './caches.ts';
import type { Metrics } from './metrics.ts';
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
}

export class Controller {
  readonly queue = new WorkQueue();
  private running: Promise<void>[] = [];
  private resync: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ControllerOptions) {
    const { caches } = opts;
    const enqueue = (obj: { metadata?: { namespace?: string; name?: string } }) => this.queue.add(keyOf(obj));
    caches.revisions.on('add', (rev) => {
      enqueue(rev);
      this.enqueueConfigurationSiblings(rev.metadata?.namespace, rev.metadata?.labels?.['serving.knative.dev/configuration']);
    });
    caches.revisions.on('update', enqueue);
    caches.revisions.on('delete', enqueue);
    // A run is named after its Revision: a reply written by any replica wakes the leader, and a
    // deleted run (`kubectl delete prestartrun`, which the hold reason suggests) starts over.
    caches.runs.on('update', enqueue);
    caches.runs.on('add', enqueue);
    caches.runs.on('delete', enqueue);
    caches.routes.on('update', (route) => this.enqueueHeldIn(route.metadata?.namespace));
    caches.routes.on('add', (route) => this.enqueueHeldIn(route.metadata?.namespace));
  }

  /** Runs workers until stop(); call only while leading. */
  start(): void {
    this.enqueueAll();
    // Like the resync of Knative's controllers: an event the informers never delivered, or one
    // whose reconcile gave up, cannot strand a held Revision for longer than one period.
    if (this.opts.resyncMs > 0) {
      this.resync = setInterval(() => this.enqueueAll(), this.opts.resyncMs);
      this.resync.unref();
    }
    for (let i = 0; i < this.opts.workers; i++) this.running.push(this.work());
  }

  async stop(): Promise<void> {
    clearInterval(this.resync);
    this.queue.shutdown();
    await Promise.all(this.running);
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      const t0 = performance.now();
      try {
        const requeueAfterMs = await this.reconcile(key);
        this.queue.forget(key);
        if (requeueAfterMs !== undefined) this.queue.addAfter(key, requeueAfterMs);
        this.opts.metrics.reconciles.inc({ result: 'ok' });
      } catch (err) {
        // A conflict only means someone wrote first (a reply, another replica): decide again.
        const level = isConflict(err) ? 'debug' : 'warn';
        this.opts.log[level]({ err: errorLine(err), key }, 'reconcile failed; retrying with backoff');
        this.opts.metrics.reconciles.inc({ result: 'error' });
        this.queue.addRateLimited(key);
      } finally {
        this.opts.metrics.reconcileSeconds.observe((performance.now() - t0) / 1000);
        this.queue.done(key);
      }
    }
  }

  /** Returns when to look again, if the core asked for it. */
  async reconcile(key: string): Promise<number | undefined> {
    const { namespace, name } = splitKey(key);
    const { caches } = this.opts;
    const revObj = caches.revisions.get(name, namespace);
    if (!revObj || !caches.namespaces.get(namespace)) return undefined;
    const revision = toRevisionView(revObj);
    const runObj = caches.runs.get(name, namespace);
    const observed: Observed = {
      revision,
      hooks: this.hooksByName(),
      run: runObj ? toRunView(runObj) : undefined,
      supersededBy: this.newerSibling(revObj),
      namedByTraffic: this.namedByTraffic(namespace, name),
      now: this.opts.apply.clock.now(),
    };
    const decision = decide(observed);
    if (decision.actions.length > 0) {
      this.opts.log.debug({ key, actions: decision.actions.map((a) => a.type) }, 'applying');
      await applyActions(decision.actions, {
        ...this.opts.apply,
        revision,
        revisionResourceVersion: revObj.metadata?.resourceVersion,
        run: runObj,
        log: this.opts.log,
      });
    }
    return decision.requeueAfterMs;
  }

  private hooksByName(): Map<string, PrestartHook> {
    return new Map(this.opts.caches.hooks.list().map((h) => [h.metadata?.name ?? '', toHook(h)]));
  }

  private newerSibling(rev: { metadata?: { namespace?: string; labels?: Record<string, string> } }): string | undefined {
    const config = rev.metadata?.labels?.['serving.knative.dev/configuration'];
    if (!config) return undefined;
    const mine = configurationGeneration(rev);
    let newest: { name: string; gen: number } | undefined;
    for (const other of this.opts.caches.revisions.list(rev.metadata?.namespace)) {
      if (other.metadata?.labels?.['serving.knative.dev/configuration'] !== config) continue;
      const gen = configurationGeneration(other);
      if (gen > mine && (!newest || gen > newest.gen)) newest = { name: other.metadata?.name ?? '', gen };
    }
    return newest?.name;
  }

  private namedByTraffic(namespace: string, name: string): boolean {
    return this.opts.caches.routes.list(namespace).some((route) => (route.spec?.traffic ?? []).some((t) => t.revisionName === name));
  }

  private enqueueAll(): void {
    for (const rev of this.opts.caches.revisions.list()) this.queue.add(keyOf(rev));
  }

  private enqueueHeldIn(namespace: string | undefined): void {
    for (const rev of this.opts.caches.revisions.list(namespace)) {
      if (rev.metadata?.labels?.[HOLD_LABEL] === 'true') this.queue.add(keyOf(rev));
    }
  }

  private enqueueConfigurationSiblings(namespace: string | undefined, config: string | undefined): void {
    if (!config) return;
    for (const rev of this.opts.caches.revisions.list(namespace)) {
      if (rev.metadata?.labels?.['serving.knative.dev/configuration'] === config && rev.metadata?.labels?.[HOLD_LABEL] === 'true') {
        this.queue.add(keyOf(rev));
      }
    }
  }
}
