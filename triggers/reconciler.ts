// Keeps the Knative Triggers of Broker-transport hooks as desiredTriggers() says: creates the
// missing ones, updates those that drifted, deletes managed ones no hook needs any more. Every
// pass starts from a fresh list of PrestartHooks and managed Triggers, so a pass is idempotent
// and a failed one is repaired by the next (a periodic resync, plus a pass soon after the gate
// reports a hook change).
//
// The Triggers also carry ownerReferences to their hooks, so the garbage collector removes them
// when the hooks go even while no gate runs; the deletion here covers what GC cannot see: a hook
// that still exists but moved to another Broker or transport.
//
// Writes are server-side apply with the gate's field manager, so fields other actors own (e.g.
// Knative's defaults) are left alone. A Trigger of the same name that the gate does not manage
// (no managed-by label) is never taken over: it is reported and skipped.
import {
  ApiException,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER } from '../api/resources.ts';
import { APPLIED_HASH_ANNOTATION, covers, withHash } from './compare.ts';
import { type Destination, desiredTriggers, MANAGED_BY, MANAGED_BY_LABEL, type TriggerObject } from './desired.ts';
import { listOwnedHooks } from './list-hooks.ts';

const TRIGGERS = { group: 'eventing.knative.dev', version: 'v1', plural: 'triggers' } as const;
const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;
/** Hook events often come in bursts (an informer's initial list, `kubectl apply -f dir/`): one pass for all. */
const HOOKS_CHANGED_DELAY_MS = 250;
/** How soon to look again at a Trigger whose old object is still being deleted. */
const PENDING_RETRY_MS = 2_000;

export interface ReconcileResult {
  created: number;
  updated: number;
  deleted: number;
  unchanged: number;
  /** Triggers that could not be written (logged), or that exist unmanaged under a name the gate needs. */
  failed: number;
  /** Triggers waiting for an old object of the same name to finish deleting (Knative's finalizer); retried shortly. */
  pending: number;
  /** True when the cluster serves no Trigger API (Knative Eventing not installed): nothing was done. */
  triggerApiMissing: boolean;
}

export interface TriggerReconcilerOptions {
  kc: KubeConfig;
  log: Logger;
  /** Where reply Triggers deliver `revision.prestart.completed` events: the gate's sink. */
  gateSubscriber: Destination;
  /** Manage only Triggers in these namespaces (default: every namespace). */
  namespaces?: readonly string[];
}

interface LiveTrigger extends KubernetesObject {
  spec?: { broker?: string };
}

const terminating = (obj: KubernetesObject) => Boolean(obj.metadata?.deletionTimestamp);
const keyOf = (ns: string | undefined, name: string | undefined) => `${ns ?? ''}/${name ?? ''}`;
const statusOf = (err: unknown): number | undefined => (err instanceof ApiException ? err.code : undefined);

/** Writing Triggers is granted per Broker namespace (config/300-rbac.yaml): what a refusal means, and the fix. */
export function mayNotWrite(namespace: string): string {
  return (
    `the gate may not write Triggers in namespace ${namespace}, so the hooks delivering through a Broker there are not asked: ` +
    `an admin grants it with kubectl create rolebinding knative-prestart-gate-triggers -n ${namespace} ` +
    '--clusterrole=knative-prestart-gate-triggers --serviceaccount=knative-prestart:knative-prestart-gate'
  );
}

export class TriggerReconciler {
  private readonly api: CustomObjectsApi;
  private readonly log: Logger;
  private readonly scope: ReadonlySet<string> | undefined;
  private apiMissingLogged = false;
  private chain: Promise<unknown> = Promise.resolve();
  private queued: Promise<ReconcileResult> | undefined;
  private resync: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: TriggerReconcilerOptions) {
    this.api = opts.kc.makeApiClient(CustomObjectsApi);
    this.log = opts.log.child({ component: 'triggers' });
    this.scope = opts.namespaces ? new Set(opts.namespaces) : undefined;
  }

  /** Reconciles now and then every `resyncMs`. */
  start(resyncMs: number): void {
    this.stopped = false;
    this.runInBackground('start');
    this.resync = setInterval(() => this.runInBackground('resync'), resyncMs);
    this.resync.unref();
  }

  /** Tell the reconciler a PrestartHook was added, changed or deleted: a pass follows shortly. */
  hooksChanged(): void {
    if (this.stopped || this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      this.runInBackground('hooks changed');
    }, HOOKS_CHANGED_DELAY_MS);
    this.debounce.unref();
  }

  /**
   * A pass that starts after this call (passes never overlap; calls made while one is waiting
   * to start share it). Rejects when the hooks cannot be listed.
   */
  reconcileNow(): Promise<ReconcileResult> {
    if (this.stopped) return Promise.reject(new Error('the Trigger reconciler is stopped'));
    if (this.queued) return this.queued;
    const pass = this.chain.then(() => {
      this.queued = undefined;
      return this.reconcile();
    });
    this.queued = pass;
    this.chain = pass.catch(() => undefined);
    return pass;
  }

  /** Stops the timers and waits for a pass under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.resync);
    clearTimeout(this.debounce);
    this.debounce = undefined;
    await this.chain;
  }

  private runInBackground(why: string): void {
    if (this.stopped) return;
    this.reconcileNow().then(
      (result) => {
        if (result.created + result.updated + result.deleted + result.failed + result.pending > 0)
          this.log.info({ why, ...result }, 'Triggers reconciled');
      },
      (err: unknown) => this.log.warn({ err, why }, 'Trigger reconcile failed; retrying at the next resync'),
    );
  }

  /** One pass. Prefer reconcileNow(), which never runs two passes at once. */
  async reconcile(): Promise<ReconcileResult> {
    const result: ReconcileResult = { created: 0, updated: 0, deleted: 0, unchanged: 0, failed: 0, pending: 0, triggerApiMissing: false };
    const hooks = await listOwnedHooks(this.api);
    const desired = desiredTriggers(hooks, this.opts.gateSubscriber).filter((t) => this.inScope(t.metadata.namespace));
    const live = await this.listManaged();
    if (!live) {
      result.triggerApiMissing = true;
      if (!this.apiMissingLogged) {
        this.apiMissingLogged = true;
        const log = desired.length > 0 ? this.log.warn.bind(this.log) : this.log.info.bind(this.log);
        log(
          { wanted: desired.length },
          'the cluster serves no eventing.knative.dev/v1 Triggers (Knative Eventing not installed?): hooks with transport broker get no Triggers until it is',
        );
      }
      return result;
    }
    if (this.apiMissingLogged) {
      this.apiMissingLogged = false;
      this.log.info('the Trigger API is served now');
    }

    const wanted = new Set<string>();
    for (const t of desired) {
      const key = keyOf(t.metadata.namespace, t.metadata.name);
      wanted.add(key);
      try {
        const outcome = await this.ensure(withHash(t), live.get(key));
        result[outcome]++;
      } catch (err) {
        result.failed++;
        if (statusOf(err) === 403) this.log.warn({ trigger: key }, mayNotWrite(t.metadata.namespace));
        else this.log.warn({ err, trigger: key }, 'could not write Trigger');
      }
    }
    for (const [key, obj] of live) {
      if (wanted.has(key) || terminating(obj)) continue;
      try {
        if (await this.delete(obj)) result.deleted++;
      } catch (err) {
        result.failed++;
        if (statusOf(err) === 403) this.log.warn({ trigger: key }, mayNotWrite(obj.metadata?.namespace ?? ''));
        else this.log.warn({ err, trigger: key }, 'could not delete Trigger');
      }
    }
    if (result.pending > 0) this.retrySoon();
    return result;
  }

  private retrySoon(): void {
    if (this.stopped || !this.resync || this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      this.runInBackground('old Trigger deleted');
    }, PENDING_RETRY_MS);
    this.debounce.unref();
  }

  private inScope(namespace: string): boolean {
    return !this.scope || this.scope.has(namespace);
  }

  /** Managed Triggers by namespace/name, or undefined when the Trigger API is not served. */
  private async listManaged(): Promise<Map<string, LiveTrigger> | undefined> {
    const items: LiveTrigger[] = [];
    try {
      if (this.scope) {
        for (const namespace of [...this.scope].sort()) {
          const list = (await this.api.listNamespacedCustomObject({ ...TRIGGERS, namespace, labelSelector: MANAGED_SELECTOR })) as {
            items: LiveTrigger[];
          };
          items.push(...list.items);
        }
      } else {
        const list = (await this.api.listClusterCustomObject({ ...TRIGGERS, labelSelector: MANAGED_SELECTOR })) as { items: LiveTrigger[] };
        items.push(...list.items);
      }
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
    return new Map(items.map((t) => [keyOf(t.metadata?.namespace, t.metadata?.name), t]));
  }

  private async ensure(t: TriggerObject, live: LiveTrigger | undefined): Promise<'created' | 'updated' | 'unchanged' | 'pending'> {
    const { namespace, name } = t.metadata;
    if (live) {
      // Applying to an object on its way out would be lost with it: wait until it is gone.
      if (terminating(live)) return 'pending';
      if (covers(live, t)) return 'unchanged';
      // Knative refuses to change a Trigger's broker (an immutable field): replace the object.
      if (live.spec?.broker !== undefined && live.spec.broker !== t.spec.broker) {
        await this.delete(live);
        if (await this.get(namespace, name)) return 'pending';
      }
      await this.apply(t);
      return 'updated';
    }
    // Not in the managed list: either missing, or someone else's Trigger under the same name.
    const existing = await this.get(namespace, name);
    if (existing && existing.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) {
      throw new Error(
        `Trigger ${namespace}/${name} exists and is not managed by ${MANAGED_BY} (no ${MANAGED_BY_LABEL} label); leaving it alone`,
      );
    }
    if (existing && terminating(existing)) return 'pending';
    await this.apply(t);
    return existing ? 'updated' : 'created';
  }

  private async get(namespace: string, name: string): Promise<LiveTrigger | undefined> {
    try {
      return (await this.api.getNamespacedCustomObject({ ...TRIGGERS, namespace, name })) as LiveTrigger;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  private async apply(t: TriggerObject): Promise<void> {
    await this.api.patchNamespacedCustomObject(
      { ...TRIGGERS, namespace: t.metadata.namespace, name: t.metadata.name, body: t, fieldManager: FIELD_MANAGER, force: true },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    this.log.debug(
      { trigger: keyOf(t.metadata.namespace, t.metadata.name), hash: t.metadata.annotations?.[APPLIED_HASH_ANNOTATION] },
      'Trigger applied',
    );
  }

  /** Deletes exactly the object seen (uid precondition); false when it was already gone (e.g. collected). */
  private async delete(obj: LiveTrigger): Promise<boolean> {
    const md = obj.metadata ?? {};
    try {
      await this.api.deleteNamespacedCustomObject({
        ...TRIGGERS,
        namespace: md.namespace ?? '',
        name: md.name ?? '',
        body: { preconditions: { uid: md.uid } },
      });
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw err;
    }
  }
}

export interface TriggerReconcilerHandle {
  /** Tell it a PrestartHook was added, changed or deleted (e.g. from the gate's hook informer). */
  hooksChanged(): void;
  reconcileNow(): Promise<ReconcileResult>;
  stop(): Promise<void>;
}

/** Starts reconciling the Triggers of Broker-transport hooks: now, every `resyncMs`, and soon after hooksChanged(). */
export function startTriggerReconciler(opts: TriggerReconcilerOptions & { resyncMs?: number }): TriggerReconcilerHandle {
  const reconciler = new TriggerReconciler(opts);
  reconciler.start(opts.resyncMs ?? 5 * 60_000);
  return {
    hooksChanged: () => reconciler.hooksChanged(),
    reconcileNow: () => reconciler.reconcileNow(),
    stop: () => reconciler.stop(),
  };
}
