// Sends one request (or cancel) to a hook through the transport its PrestartHook names, and turns
// what comes back into replies: a synchronous CloudEvent answer, or a permanent delivery failure
// that the user should see as the hook's failure rather than as silence until the timeout.
import type { Logger } from 'pino';
import type { HookSnapshot, RevisionView } from '../../api/types.ts';
import type { Transports } from '../../emitter/index.ts';
import { TransportError } from '../../emitter/transport.ts';
import type { Message } from '../../schemas/event.ts';
import { buildRequested, type KeyRing, parseCompleted } from '../../schemas/index.ts';
import type { Metrics } from './metrics.ts';
import type { ReplyRecorder } from './replies.ts';

export interface RequestSenderOptions {
  transports: Transports;
  keys: KeyRing;
  /** CloudEvents `source` of everything the gate sends. */
  source: string;
  /** Where hooks POST asynchronous replies (the gate's HTTP sink), when the gate has one reachable. */
  replyTo?: string;
  replies: ReplyRecorder;
  maxReplyBytes: number;
  log: Logger;
  metrics: Metrics;
}

export class RequestSender {
  constructor(private readonly opts: RequestSenderOptions) {}

  async send(
    revision: RevisionView,
    hook: HookSnapshot,
    attempt: number,
    deadline: string,
    action: 'start' | 'cancel',
    reason?: string,
  ): Promise<void> {
    const { keys, source, replyTo, transports, log, metrics } = this.opts;
    const event = buildRequested({ revision, hook, attempt, deadline, action, reason, replyTo, source, keys });
    const transport = transports.forDelivery(hook.delivery);
    try {
      const outcome = await transport.send(event, hook.delivery, hook.name);
      metrics.requests.inc({ transport: transport.kind, action, result: outcome.type });
      if (outcome.type === 'replied' && action === 'start') await this.recordSyncReply(revision, hook, attempt, outcome.reply);
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      metrics.requests.inc({ transport: transport.kind, action, result: err.retriable ? 'retriable-error' : 'error' });
      if (err.retriable || action === 'cancel') {
        // The resend rule of the core sends it again; nothing is lost by waiting.
        log.warn(
          { hook: hook.name, revision: `${revision.namespace}/${revision.name}`, err: err.message },
          'request not delivered; will resend',
        );
        return;
      }
      log.warn(
        { hook: hook.name, revision: `${revision.namespace}/${revision.name}`, err: err.message },
        'request refused; the hook fails',
      );
      await this.recordFailure(revision, hook, attempt, `the hook could not take the request: ${err.message}`);
    }
  }

  private async recordSyncReply(revision: RevisionView, hook: HookSnapshot, attempt: number, reply: Message): Promise<void> {
    const parsed = parseCompleted(reply, { keys: this.opts.keys, maxBytes: this.opts.maxReplyBytes });
    if (!parsed.ok) {
      await this.recordFailure(revision, hook, attempt, `the hook answered with an invalid reply: ${parsed.error.reason}`);
      return;
    }
    await this.opts.replies.record(parsed.reply);
  }

  private async recordFailure(revision: RevisionView, hook: HookSnapshot, attempt: number, message: string): Promise<void> {
    await this.opts.replies.record({
      namespace: revision.namespace,
      revision: revision.name,
      revisionUID: revision.uid,
      hook: hook.name,
      attempt,
      outcome: 'failed',
      message,
      eventKey: 'gate/delivery-failure',
    });
  }
}
