// One informer (client-node's ListWatch) that knows whether it can be trusted. client-node 1.4
// resolves start() even when the first LIST failed, leaving an empty cache that looks like an
// empty cluster; it restarts nothing after an error; and a watch whose connection went half-open
// delivers nothing, forever, without an error. This wrapper records the first successful list,
// how long the informer has been failing, restarts it after errors, and ends a watch the
// apiserver should have closed (timeoutSeconds) but did not. An optional transform trims each
// object (from the list and from every watch event) before the cache keeps it, and an Accept
// header asks the apiserver for a lighter form (metadata only) in the first place.
import {
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  type ObjectCache,
  Watch,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine } from '../../api/kube-errors.ts';

export type Cache<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export interface InformerHealth {
  /** The resource, as the apiserver names it (revisions, prestarthooks, namespaces, ...). */
  name: string;
  /** Listed successfully at least once: the cache holds the cluster's state, not an empty guess. */
  listed: boolean;
  /** Local time (ms since the epoch) of the first failure since the informer last worked. */
  failingSince?: number;
  lastError?: string;
}

export interface TrackedInformer<T extends KubernetesObject> {
  cache: Cache<T>;
  health(): InformerHealth;
  /** Resolves at the first successful list. */
  listed: Promise<void>;
}

export interface InformerOptions<T extends KubernetesObject = KubernetesObject> {
  /** Applied to the watch here; the list function applies it to its own request. */
  labelSelector?: string;
  /**
   * What the cache keeps of each object the watch delivers (the list function applies it to its
   * items): the gate caches only what its decisions read, not the full object the apiserver sent.
   */
  transform?: (obj: T) => T;
  /** The watch's Accept header, e.g. PartialObjectMetadata (the list function asks for the same). */
  accept?: string;
  /** The apiserver ends each watch after this long (client-go picks 5 to 10 min); default random in that range. */
  watchTimeoutSeconds?: number;
}

const RESTART_DELAY_MS = 2_000;
/** How long past its timeoutSeconds a watch may stay open before the gate presumes its connection dead. */
const WATCH_GRACE_MS = 30_000;

export function trackedInformer<T extends KubernetesObject>(
  kc: KubeConfig,
  path: string,
  list: () => Promise<KubernetesListObject<T>>,
  name: string,
  log: Logger,
  opts: InformerOptions<T> = {},
): TrackedInformer<T> {
  const state: InformerHealth = { name, listed: false };
  let markListed: () => void = () => undefined;
  const listed = new Promise<void>((resolve) => {
    markListed = resolve;
  });
  const working = () => {
    state.failingSince = undefined;
    state.lastError = undefined;
  };
  const listFn = async () => {
    const t0 = performance.now();
    const result = await list();
    // Each (re-)list once: how many objects and how long, for an operator watching a relist storm.
    log.info({ what: name, objects: result.items.length, ms: Math.round(performance.now() - t0) }, 'listed');
    state.listed = true;
    working();
    markListed();
    return result;
  };
  let stopped = false;
  const watch = new GuardedWatch(
    kc,
    opts.watchTimeoutSeconds,
    working,
    () => stopped,
    opts.transform as Transform | undefined,
    opts.accept,
  );
  const cache = new ListWatch<T>(path, watch, listFn, false, opts.labelSelector);

  const stop = cache.stop.bind(cache);
  cache.stop = async () => {
    stopped = true;
    await stop();
  };
  cache.on('error', (err?: unknown) => {
    if (stopped) return;
    state.failingSince ??= Date.now();
    state.lastError = errorLine(err);
    log.warn({ err: state.lastError, what: name }, 'list or watch failed; restarting');
    setTimeout(() => {
      if (!stopped) cache.start().catch((e: unknown) => log.warn({ err: errorLine(e), what: name }, 'restart failed'));
    }, RESTART_DELAY_MS).unref();
  });
  return { cache, health: () => ({ ...state }), listed };
}

type Transform = (obj: KubernetesObject) => KubernetesObject;

/** Events whose object is a Kubernetes object of the watched kind (not a Status, not a bookmark). */
const OBJECT_EVENTS = new Set(['ADDED', 'MODIFIED', 'DELETED']);

/**
 * client-node's Watch, with the apiserver asked to end each watch after `timeoutSeconds` and the
 * connection aborted if it has not ended a grace period later (the connection went half-open: no
 * error would ever come). `connected` is called once the apiserver accepted the watch. Each
 * event's object goes through `transform` before the cache sees it; `accept` replaces the Accept
 * header (client-node's Watch builds its request from the KubeConfig's fetch options).
 *
 * `stopped` closes a race in client-node 1.4's ListWatch: stop() aborts only the request it
 * already holds, so a stop while the list or the watch request is in flight let a new watch open
 * after it, holding a connection (and the process) for up to the watch's timeout.
 */
class GuardedWatch extends Watch {
  constructor(
    kc: KubeConfig,
    private readonly timeoutSeconds: number | undefined,
    private readonly connected: () => void,
    private readonly stopped: () => boolean,
    private readonly transform: Transform | undefined,
    accept: string | undefined,
  ) {
    super(accept ? withAccept(kc, accept) : kc);
  }

  override async watch(...[path, queryParams, callback, done]: Parameters<Watch['watch']>): Promise<AbortController> {
    if (this.stopped()) return abortedController();
    const seconds = this.timeoutSeconds ?? 300 + Math.floor(Math.random() * 300);
    let ended = false;
    let guard: NodeJS.Timeout | undefined;
    const transform = this.transform;
    const deliver: typeof callback = transform
      ? (phase, obj, raw) => callback(phase, OBJECT_EVENTS.has(phase) ? transform(obj) : obj, raw)
      : callback;
    const controller = await super.watch(path, { ...queryParams, timeoutSeconds: seconds, allowWatchBookmarks: true }, deliver, (err) => {
      ended = true;
      clearTimeout(guard);
      done(err);
    });
    if (this.stopped()) {
      controller.abort();
      return controller;
    }
    // The inner watch calls done() before returning when the apiserver refused it (403, 410, ...).
    if (!ended) {
      this.connected();
      guard = setTimeout(() => controller.abort(), seconds * 1000 + WATCH_GRACE_MS);
      guard.unref();
    }
    return controller;
  }
}

function abortedController(): AbortController {
  const controller = new AbortController();
  controller.abort();
  return controller;
}

/** `kc` with every watch request asking for `accept` (the rest of its options unchanged). */
function withAccept(kc: KubeConfig, accept: string): KubeConfig {
  const facade = Object.create(kc) as KubeConfig;
  facade.applyToFetchOptions = (opts) => kc.applyToFetchOptions({ ...opts, headers: { ...opts.headers, Accept: accept } });
  return facade;
}
