// Sends one request (or cancel) to a hook through the transport its PrestartHook names and says
// what came back. The sending half only: it never writes the run. A synchronous answer or a
// refusal goes back to the caller, which hands it to the intake once its action list is applied
// (gate/delivery/answers.ts).
import type { Logger } from 'pino';
import type { ContainerImage, HookSnapshot, RevisionView } from '../../api/types.ts';
import type { Transports } from '../../emitter/index.ts';
import { TransportError } from '../../emitter/transport.ts';
import type { Message } from '../../schemas/event.ts';
import { buildRequested, type KeyRing } from '../../schemas/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Tracing } from '../telemetry/tracing.ts';

export interface RequestSenderOptions {
  transports: Transports;
  keys: KeyRing;
  /** CloudEvents `source` of everything the gate sends. */
  source: string;
  /** Where hooks POST asynchronous replies (the gate's HTTP sink), when the gate has one reachable. */
  replyTo?: string;
  log: Logger;
  metrics: Metrics;
  /** Makes each request's traceparent from its attempt's span. */
  tracing?: Tracing;
}

export type SendResult =
  /** Taken: the reply comes later to a sink. */
  | { type: 'accepted' }
  /** The hook answered at once with what should be a completed event (direct HTTP, 200 + CloudEvent). */
  | { type: 'replied'; message: Message }
  /** Not delivered; `retriable` says whether sending again later may succeed. */
  | { type: 'undelivered'; retriable: boolean; reason: string };

export class RequestSender {
  constructor(private readonly opts: RequestSenderOptions) {}

  /**
   * `runUID`: the PrestartRun the request belongs to (see buildRequested). `containers`: what that
   * run recorded (its spec.containers), never read from the Revision here: the hook is asked
   * about what the run will be released with.
   */
  async send(
    revision: RevisionView,
    runUID: string | undefined,
    hook: HookSnapshot,
    attempt: number,
    deadline: string,
    action: 'start' | 'cancel',
    reason?: string,
    containers?: readonly ContainerImage[],
  ): Promise<SendResult> {
    const { keys, source, replyTo, transports, log, metrics } = this.opts;
    const traceparent = this.opts.tracing?.traceparent(runUID ?? revision.uid, hook.name, attempt);
    const event = buildRequested({
      revision,
      runUID,
      hook,
      attempt,
      deadline,
      action,
      reason,
      replyTo,
      source,
      keys,
      traceparent,
      containers,
    });
    const transport = transports.forDelivery(hook.delivery);
    try {
      const outcome = await transport.send(event, hook.delivery, hook.name);
      metrics.requests.inc({ transport: transport.kind, action, result: outcome.type });
      return outcome.type === 'replied' ? { type: 'replied', message: outcome.reply } : { type: 'accepted' };
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      metrics.requests.inc({ transport: transport.kind, action, result: err.retriable ? 'retriable-error' : 'error' });
      log.debug({ hook: hook.name, revision: `${revision.namespace}/${revision.name}`, action, err: err.message }, 'request not delivered');
      return { type: 'undelivered', retriable: err.retriable, reason: err.message };
    }
  }
}
