// Records a verified reply in the PrestartRun; the intake (sinks/intake.ts) is its only caller,
// whichever road the reply took. Any replica may do this (the sinks run on every replica): the
// write is conditional on the resourceVersion it was computed from, so concurrent replies and the
// leader's own writes serialise through the apiserver, never overwrite each other.
import type { Logger } from 'pino';
import { isConflict } from '../../api/kube-errors.ts';
import { type RunObject, toRunView } from '../../api/resources.ts';
import type { Reply } from '../../api/types.ts';
import type { ReplyDisposition } from '../../sinks/types.ts';
import { applyReply } from '../core/index.ts';
import type { KubeClient } from '../kube/kube-client.ts';
import type { Clock } from '../runtime/clock.ts';
import { crashPoint } from '../runtime/crashpoints.ts';

export type { ReplyDisposition };

const MAX_CONFLICT_RETRIES = 8;

export class ReplyRecorder {
  constructor(
    private readonly client: KubeClient,
    /** The newest cached copy, tried first to save a round trip; a stale one only costs a 409 and a re-read. */
    private readonly cachedRuns: { get(namespace: string, name: string): RunObject | undefined },
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  private recorded: (namespace: string, name: string) => void = () => undefined;

  /**
   * Called once a reply is stored: the leader reconciles the Revision at once, from the run as
   * written (written-runs.ts), instead of when its watch brings the change. Set after
   * construction because the one who listens, the controller, is built on the intake that calls
   * record(): the two need each other, so the controller subscribes once it exists.
   */
  onRecorded(listener: (namespace: string, name: string) => void): void {
    this.recorded = listener;
  }

  /** Resolves once the reply is stored (or known to change nothing); throws on transient errors. */
  async record(reply: Reply): Promise<ReplyDisposition> {
    for (let i = 0; i < MAX_CONFLICT_RETRIES; i++) {
      const cached = i === 0 ? this.cachedRuns.get(reply.namespace, reply.revision) : undefined;
      const run = cached ?? (await this.client.getRun(reply.namespace, reply.revision));
      if (!run)
        return this.count({ type: 'rejected', reason: `unknown revision ${reply.namespace}/${reply.revision}: no PrestartRun` }, reply);
      const result = applyReply(toRunView(run), reply, this.clock.now());
      // A cached copy may be behind (the reply's attempt not yet visible): refuse only what the apiserver's copy refuses.
      if (cached && result.type !== 'applied' && result.type !== 'progress') continue;
      if (result.type === 'duplicate') return this.count({ type: 'duplicate' }, reply);
      if (result.type === 'rejected') return this.count({ type: 'rejected', reason: result.reason }, reply);
      try {
        await this.client.replaceRunStatus(run, result.status);
        crashPoint('after-reply-recorded');
        this.recorded(reply.namespace, reply.revision);
        return this.count({ type: 'applied' }, reply);
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
    }
    throw new Error(`PrestartRun ${reply.namespace}/${reply.revision} kept changing; try again`);
  }

  private count(d: ReplyDisposition, reply: Reply): ReplyDisposition {
    const fields = { hook: reply.hook, revision: `${reply.namespace}/${reply.revision}`, attempt: reply.attempt, event: reply.eventKey };
    if (d.type === 'rejected') this.log.warn({ ...fields, reason: d.reason }, 'reply rejected');
    else this.log.info({ ...fields, outcome: reply.outcome, result: d.type }, 'reply recorded');
    return d;
  }
}
