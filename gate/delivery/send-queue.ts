// Sends requests and cancels to hooks off the reconcile workers. The reconcile records a request
// in the run's status (a new run's first ones: in its spec.startedAt) and hands the send here
// (record, then send: it is queued only once that is stored); the network send happens in the
// background, at most `perHook` at a time per hook and `overall` in all, taken from the hooks in
// turn. So 1,000 Revisions waiting on a
// hook whose address swallows every connection (each send costs the transport's whole timeout)
// occupy that hook's few slots, and the requests, releases and cancels of every other hook go on.
// A team's hooks (NamespacedPrestartHook) share `perNamespace` slots per namespace besides: a team
// whose twenty hooks all hang holds that many, and every other team's and the admin's go on.
//
// What a send brings back (a hook's synchronous reply, a refusal) goes to the one reply intake,
// under the Revision's lock (exclusive): "only the list's own actions write the run while it is
// applied" (gate/controller/apply.ts) holds for answers that come back later, as it did when the list
// waited for them.
import type { Logger } from 'pino';
import type { ContainerImage, HookSnapshot, RevisionView } from '../../api/types.ts';
import type { Intake } from '../../sinks/intake.ts';
import { namespaceOfHook, requestRef, sendKey } from '../core/index.ts';
import { crashPoint } from '../runtime/crashpoints.ts';
import { ObjectLocks } from '../runtime/object-locks.ts';
import { takeAnswers } from './answers.ts';
import type { RequestSender } from './request-sender.ts';

export interface SendLimits {
  /** Sends to one hook in flight at once. */
  perHook: number;
  /** Sends in flight at once, all hooks together. */
  overall: number;
  /** Sends in flight at once to the NamespacedPrestartHooks of one namespace, together; default 16. */
  perNamespace?: number;
}

/**
 * A hook that takes requests at once never has more than a few in flight; one that hangs gets
 * this many connections held open, not one per held Revision.
 */
const PER_NAMESPACE = 16;
export const DEFAULT_SEND_LIMITS: SendLimits = { perHook: 8, overall: 64, perNamespace: PER_NAMESPACE };

export interface SendJob {
  /**
   * A job waiting under the same key is replaced (keeping its place): one send per Revision, hook
   * and kind waits. Two jobs of one key never run at once: a resend does not overlap the send
   * before it, a newer condition is not written while an older one is.
   */
  key: string;
  /** The lane (a hook, or a kind of background write) whose slots the job takes. */
  lane: string;
  /** The group whose shared slots (SendLimits.perNamespace) the lane's jobs take too: a namespaced hook's namespace. */
  group?: string;
  run: () => Promise<void>;
}

interface Lane {
  /** Waiting jobs by key, oldest first (a Map keeps insertion order, and a replaced key keeps its place). */
  waiting: Map<string, SendJob>;
  active: number;
  group?: string;
}

/** Jobs per lane, run with bounded concurrency per lane and in all, the lanes taken in turn. */
export class SendQueue {
  private readonly lanes = new Map<string, Lane>();
  /** Lanes with waiting jobs, in the order they get their next turn. */
  private turn: string[] = [];
  private active = 0;
  /** Jobs running now per group (SendJob.group). */
  private readonly groupActive = new Map<string, number>();
  /** Keys of the jobs running now. */
  private readonly running = new Set<string>();
  private idleWaiters: Array<() => void> = [];
  private paused = false;

  constructor(private readonly limits: SendLimits = DEFAULT_SEND_LIMITS) {}

  /** Starts no job until resume(); jobs running go on. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.pump();
  }

  add(job: SendJob): void {
    let lane = this.lanes.get(job.lane);
    if (!lane) {
      lane = job.group === undefined ? { waiting: new Map(), active: 0 } : { waiting: new Map(), active: 0, group: job.group };
      this.lanes.set(job.lane, lane);
    }
    if (lane.waiting.size === 0) this.turn.push(job.lane);
    lane.waiting.set(job.key, job);
    this.pump();
  }

  /** Drops a waiting job (one already running runs on). */
  drop(laneName: string, key: string): void {
    const lane = this.lanes.get(laneName);
    if (!lane?.waiting.delete(key)) return;
    if (lane.waiting.size === 0) this.turn = this.turn.filter((l) => l !== laneName);
    this.forgetIfEmpty(laneName, lane);
  }

  /** Drops every waiting job: the replica no longer leads, its sends are another's to make. */
  clear(): void {
    for (const [name, lane] of this.lanes) {
      lane.waiting.clear();
      this.forgetIfEmpty(name, lane);
    }
    this.turn = [];
    this.settle();
  }

  /** Jobs waiting for a slot. */
  get waiting(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.waiting.size;
    return n;
  }

  /** Jobs sending now. */
  get sending(): number {
    return this.active;
  }

  /** Resolves when nothing waits and nothing is sending. */
  idle(): Promise<void> {
    if (this.active === 0 && this.turn.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (!this.paused && this.active < this.limits.overall) {
      const job = this.next();
      if (!job) break;
      this.start(job);
    }
    this.settle();
  }

  /**
   * The first waiting job (whose key is not running) of the first lane in turn that has a free
   * slot; that lane goes to the back of the turn.
   */
  private next(): SendJob | undefined {
    for (let i = 0; i < this.turn.length; i++) {
      const name = this.turn[i] as string;
      const lane = this.lanes.get(name);
      if (!lane || lane.active >= this.limits.perHook) continue;
      if (lane.group !== undefined && (this.groupActive.get(lane.group) ?? 0) >= (this.limits.perNamespace ?? PER_NAMESPACE)) continue;
      let job: SendJob | undefined;
      for (const waiting of lane.waiting.values()) {
        if (this.running.has(waiting.key)) continue;
        job = waiting;
        break;
      }
      if (!job) continue;
      lane.waiting.delete(job.key);
      this.turn.splice(i, 1);
      if (lane.waiting.size > 0) this.turn.push(name);
      return job;
    }
    return undefined;
  }

  private start(job: SendJob): void {
    const lane = this.lanes.get(job.lane) as Lane;
    lane.active++;
    this.active++;
    if (lane.group !== undefined) this.groupActive.set(lane.group, (this.groupActive.get(lane.group) ?? 0) + 1);
    this.running.add(job.key);
    void job
      .run()
      .catch(() => undefined)
      .finally(() => {
        lane.active--;
        this.active--;
        if (lane.group !== undefined) {
          const left = (this.groupActive.get(lane.group) ?? 1) - 1;
          if (left > 0) this.groupActive.set(lane.group, left);
          else this.groupActive.delete(lane.group);
        }
        this.running.delete(job.key);
        this.forgetIfEmpty(job.lane, lane);
        this.pump();
      });
  }

  private forgetIfEmpty(name: string, lane: Lane): void {
    if (lane.active === 0 && lane.waiting.size === 0) this.lanes.delete(name);
  }

  private settle(): void {
    if (this.active > 0 || this.turn.length > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

export interface HookSendsOptions {
  sender: RequestSender;
  /** Where synchronous answers and refusals go: the same intake as the sinks'. */
  intake: Intake;
  log: Logger;
  limits?: SendLimits;
}

/** The reconcile's side of sending: queue a request or a cancel, and apply a Revision's actions under its lock. */
export class HookSends {
  private readonly queue: SendQueue;
  private readonly locks = new ObjectLocks();
  /**
   * When each Revision's run last had a request queued this term, by hook and attempt: decide's
   * Observed.sent. Resends are not written to the run (gate/core/resend.ts); this spaces them.
   */
  private readonly sent = new Map<string, { runUID: string | undefined; at: Map<string, number> }>();

  constructor(private readonly opts: HookSendsOptions) {
    this.queue = new SendQueue(opts.limits ?? DEFAULT_SEND_LIMITS);
  }

  /** Runs `fn` (an action list) while no answer for this Revision is being handed to the intake. */
  exclusive<T>(revision: Pick<RevisionView, 'namespace' | 'name'>, fn: () => Promise<T>): Promise<T> {
    return this.locks.exclusive(`${revision.namespace}/${revision.name}`, fn);
  }

  /**
   * Queues a start request whose first sending the run records (a resend of it needs no record).
   * `at`: when it is queued (the gate's clock), remembered as this request's last send.
   */
  request(
    revision: RevisionView,
    runUID: string | undefined,
    hook: HookSnapshot,
    attempt: number,
    deadline: string,
    at: number,
    containers?: readonly ContainerImage[],
  ): void {
    const { sender, intake, log } = this.opts;
    const revisionKey = `${revision.namespace}/${revision.name}`;
    const known = this.sent.get(revisionKey);
    const sent = known && known.runUID === runUID ? known : { runUID, at: new Map<string, number>() };
    if (sent !== known) this.sent.set(revisionKey, sent);
    sent.at.set(sendKey(hook.name, attempt), at);
    this.queue.add({
      key: `${revisionKey}/${hook.name}/start`,
      lane: hook.name,
      ...groupOf(hook),
      run: async () => {
        let result: Awaited<ReturnType<RequestSender['send']>>;
        try {
          result = await sender.send(revision, runUID, hook, attempt, deadline, 'start', undefined, containers);
        } catch (err) {
          // Not a delivery failure but a fault of ours: the resend rule asks again.
          log.warn({ err, hook: hook.name, revision: revisionKey }, 'request not sent');
          return;
        }
        crashPoint('after-send');
        const answer = { request: requestRef(revision, runUID, hook.name, attempt), result };
        await this.locks.exclusive(revisionKey, () => takeAnswers([answer], intake, log));
      },
    });
  }

  /** Queues a cancel (best effort: the Revision goes on whether or not it arrives); a start still waiting is dropped. */
  cancel(
    revision: RevisionView,
    runUID: string | undefined,
    hook: HookSnapshot,
    attempt: number,
    reason: string,
    at: string,
    containers?: readonly ContainerImage[],
  ): void {
    const { sender, log } = this.opts;
    const revisionKey = `${revision.namespace}/${revision.name}`;
    this.queue.drop(hook.name, `${revisionKey}/${hook.name}/start`);
    this.queue.add({
      key: `${revisionKey}/${hook.name}/cancel`,
      lane: hook.name,
      ...groupOf(hook),
      run: async () => {
        try {
          const result = await sender.send(revision, runUID, hook, attempt, at, 'cancel', reason, containers);
          if (result.type === 'undelivered')
            log.warn({ hook: hook.name, err: result.reason }, 'could not tell the hook its request was cancelled');
        } catch (err) {
          log.warn({ err, hook: hook.name }, 'could not tell the hook its request was cancelled');
        }
      },
    });
  }

  /** When this term last queued each hook's attempt of the Revision's run `runUID` (Observed.sent). */
  sentFor(namespace: string, name: string, runUID: string | undefined): ReadonlyMap<string, number> | undefined {
    const sent = this.sent.get(`${namespace}/${name}`);
    return sent && sent.runUID === runUID ? sent.at : undefined;
  }

  /** Nothing is left to send for the Revision (released, cancelled, gone). */
  forget(namespace: string, name: string): void {
    this.sent.delete(`${namespace}/${name}`);
  }

  /**
   * Drops what waits to be sent and what was sent (leadership lost: the next term asks every
   * Requested hook once); sends in flight finish and hand their answers over.
   */
  clear(): void {
    this.queue.clear();
    this.sent.clear();
  }

  /** Resolves once nothing waits and nothing is in flight (tests, benches). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  get waiting(): number {
    return this.queue.waiting;
  }
}

/** A namespaced hook's sends share its namespace's slots. */
function groupOf(hook: HookSnapshot): { group?: string } {
  const namespace = namespaceOfHook(hook.name);
  return namespace === undefined ? {} : { group: namespace };
}
