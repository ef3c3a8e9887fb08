// One small interface for every way a request reaches a hook (like cloudevents' split between
// a message and its transport): the gate builds the CloudEvent once and hands it to whichever
// transport the PrestartHook names.
import type { HookDelivery, TransportKind } from '../api/types.ts';
import type { CloudEventRecord, Message } from '../schemas/event.ts';

export type SendOutcome =
  /** The hook (or the Broker/stream) took the request; the reply will come later to a sink. */
  | { type: 'accepted' }
  /** The hook answered synchronously with a completed event (direct HTTP, 200 + CloudEvent). */
  | { type: 'replied'; reply: Message };

export class TransportError extends Error {
  constructor(
    message: string,
    /** True when sending again later may succeed (network error, 5xx, 429, timeouts). */
    readonly retriable: boolean,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

export interface Transport {
  readonly kind: TransportKind;
  /** Delivers one request or cancel event to the hook described by `delivery`. Throws TransportError. */
  send(event: CloudEventRecord, delivery: HookDelivery, hook: string): Promise<SendOutcome>;
  close(): Promise<void>;
}
