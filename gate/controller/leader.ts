// Lease-based leader election (coordination.k8s.io/v1), the protocol of client-go's
// leaderelection: one replica acts at a time; every write of the lease is conditional on the
// resourceVersion read, so two candidates can never both believe they won. As in client-go, a
// lease is judged expired by the local time at which this replica last saw it change (the
// holder's renewTime was written by another clock), and a leader that has not renewed within
// its renew deadline stops acting, even while its renewal hangs, before any successor may start.
import { CoordinationV1Api, type KubeConfig, type V1Lease, type V1LeaseSpec } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine, isConflict, isNotFound } from '../../api/kube-errors.ts';
import type { RequestObserver } from '../kube/apiserver-agent-pool.ts';
import { withRequestTimeout } from '../kube/kube-client.ts';

/** Something that acts only during a term of leadership (the controller, the leader's checks). */
export interface LeaderTerm {
  startTerm(): void;
  endTerm(): void;
}

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  /** How long a lease that stopped changing blocks a successor. Default 10. */
  leaseSeconds?: number;
  /** How often the leader renews. Default leaseSeconds / 3. */
  renewSeconds?: number;
  /** A leader that has not renewed for this long steps down; below leaseSeconds. Default 2/3 of it. */
  renewDeadlineSeconds?: number;
  /** What acts only while this replica leads: told in order when a term begins, in reverse when it ends. */
  terms: readonly LeaderTerm[];
  /** Hears each lease call's duration, as the gate's other API clients' (metrics.kubeRequest). */
  observeRequest?: RequestObserver;
}

/** Candidates and a leader whose renewal failed try again this often at most (client-go's RetryPeriod). */
const MAX_RETRY_MS = 2_000;

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly leaseMs: number;
  private readonly renewMs: number;
  private readonly deadlineMs: number;
  private readonly observer = new LeaseObserver();
  private timer: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private leading = false;
  private stopped = false;

  constructor(
    kc: KubeConfig,
    private readonly opts: LeaderOptions,
    private readonly log: Logger,
  ) {
    this.leaseMs = (opts.leaseSeconds ?? 10) * 1000;
    this.renewMs = opts.renewSeconds !== undefined ? opts.renewSeconds * 1000 : this.leaseMs / 3;
    this.deadlineMs = opts.renewDeadlineSeconds !== undefined ? opts.renewDeadlineSeconds * 1000 : (this.leaseMs * 2) / 3;
    if (this.deadlineMs >= this.leaseMs) throw new Error('leader election: the renew deadline must be shorter than the lease');
    // No lease call may outlive one renewal period: a hung call must not hold up the next try.
    this.api = withRequestTimeout(
      kc,
      Math.max(500, Math.min(this.renewMs, this.leaseMs - this.deadlineMs)),
      opts.observeRequest,
    ).makeApiClient(CoordinationV1Api);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    void this.tick();
  }

  /** Gives the lease up so a successor need not wait for it to expire. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.deadline);
    if (!this.leading) return;
    this.setLeading(false);
    try {
      const lease = await this.api.readNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace });
      if (lease.spec?.holderIdentity === this.opts.identity) {
        lease.spec.holderIdentity = undefined;
        lease.spec.renewTime = undefined;
        lease.spec.acquireTime = lease.spec.acquireTime && microTime(new Date(lease.spec.acquireTime));
        await this.api.replaceNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace, body: lease });
      }
    } catch (err) {
      this.log.debug({ err }, 'could not release the lease');
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    // The deadline counts from when the renewal was sent: the write may have been committed (and
    // seen by a successor) at any moment after that.
    const sentAt = performance.now();
    let outcome: 'won' | 'lost' | 'failed' = 'failed';
    try {
      outcome = (await this.tryAcquireOrRenew()) ? 'won' : 'lost';
    } catch (err) {
      this.log.warn({ err: errorLine(err), leading: this.leading }, 'leader election round failed');
    }
    if (this.stopped) return;
    const left = sentAt + this.deadlineMs - performance.now();
    if (outcome === 'won' && left > 0) {
      clearTimeout(this.deadline);
      this.deadline = setTimeout(() => {
        this.log.warn({ identity: this.opts.identity }, 'lease not renewed within the renew deadline; stepping down');
        this.setLeading(false);
      }, left);
      this.deadline.unref();
      this.setLeading(true);
    } else if (outcome === 'lost') {
      clearTimeout(this.deadline);
      this.setLeading(false);
    }
    // 'failed': a leader keeps acting until its deadline fires; everyone tries again soon.
    this.timer = setTimeout(() => void this.tick(), outcome === 'won' ? this.renewMs : Math.min(this.renewMs, MAX_RETRY_MS));
    this.timer.unref();
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.log.info({ identity: this.opts.identity, leading }, leading ? 'became leader' : 'stopped leading');
    if (leading) for (const term of this.opts.terms) term.startTerm();
    else for (const term of [...this.opts.terms].reverse()) term.endTerm();
  }

  /** True when this replica holds the lease after the round; throws when the round failed. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    const leaseSeconds = this.leaseMs / 1000;
    const now = microTime(new Date());
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace },
            spec: { holderIdentity: identity, leaseDurationSeconds: leaseSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          },
        });
        return true;
      } catch (e) {
        if (isConflict(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    this.observer.observe(spec, performance.now());
    const holder = spec.holderIdentity;
    const durationMs = (spec.leaseDurationSeconds ?? leaseSeconds) * 1000;
    if (holder && holder !== identity && !this.observer.expired(durationMs, performance.now())) return false;
    const takingOver = holder !== identity;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: leaseSeconds,
      acquireTime: takingOver ? now : spec.acquireTime && microTime(new Date(spec.acquireTime)),
      renewTime: now,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (takingOver ? 1 : 0),
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body: lease });
      return true;
    } catch (err) {
      // Someone wrote the lease since we read it: a failed round, not a verdict (the next read tells).
      if (isConflict(err)) throw new Error('the lease changed while renewing it');
      throw err;
    }
  }
}

/**
 * client-go's expiry rule: a lease expires when THIS replica has not seen its record change for
 * the lease duration, measured on this replica's monotonic clock. Comparing the holder's
 * renewTime with the local clock instead would let a replica whose clock runs ahead steal a live
 * lease after every renewal.
 */
export class LeaseObserver {
  private seen: { record: string; at: number } | undefined;

  /** Notes the lease's record as read at local time `now` (ms, monotonic). */
  observe(spec: V1LeaseSpec, now: number): void {
    const record = JSON.stringify([
      spec.holderIdentity,
      spec.renewTime,
      spec.acquireTime,
      spec.leaseTransitions,
      spec.leaseDurationSeconds,
    ]);
    if (this.seen?.record !== record) this.seen = { record, at: now };
  }

  /** True when the record last observed has not changed for `durationMs` up to local time `now`. */
  expired(durationMs: number, now: number): boolean {
    return this.seen !== undefined && now - this.seen.at > durationMs;
  }
}

/**
 * Lease times are metav1.MicroTime, which the apiserver parses with exactly six fractional
 * digits; the client would serialise a Date with three and get a 400. A string passes through
 * its serialiser untouched.
 */
function microTime(d: Date): Date {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date;
}
