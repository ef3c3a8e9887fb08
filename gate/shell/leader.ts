// Lease-based leader election (coordination.k8s.io/v1), the same protocol as client-go's
// leaderelection: one replica acts at a time; every write of the lease is conditional on the
// resourceVersion read, so two candidates can never both believe they won.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine, isConflict, isNotFound } from '../../api/kube-errors.ts';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseSeconds?: number;
  renewSeconds?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  private stopped = false;

  constructor(
    kc: KubeConfig,
    private readonly opts: LeaderOptions,
    private readonly log: Logger,
  ) {
    this.api = kc.makeApiClient(CoordinationV1Api);
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
    if (this.timer) clearTimeout(this.timer);
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
    let won = false;
    try {
      won = await this.tryAcquireOrRenew();
    } catch (err) {
      this.log.warn({ err: errorLine(err) }, 'leader election round failed');
    }
    if (this.stopped) return;
    this.setLeading(won);
    const renew = (this.opts.renewSeconds ?? 2) * 1000;
    this.timer = setTimeout(() => void this.tick(), renew);
    this.timer.unref();
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.log.info({ identity: this.opts.identity, leading }, leading ? 'became leader' : 'stopped leading');
    if (leading) this.opts.onStartedLeading();
    else this.opts.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    const leaseSeconds = this.opts.leaseSeconds ?? 10;
    const nowDate = new Date();
    const now = microTime(nowDate);
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
    const holder = spec.holderIdentity;
    const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = renewed + (spec.leaseDurationSeconds ?? leaseSeconds) * 1000 < nowDate.getTime();
    if (holder && holder !== identity && !expired) return false;
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
      if (isConflict(err)) return false;
      throw err;
    }
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
