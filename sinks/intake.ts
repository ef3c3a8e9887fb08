// The one path every reply takes into the gate's state, whatever carried it: the HTTP sink, the
// NATS sink, a hook's synchronous 200 answer (the gate hands it over once the action list that
// sent the request is applied), and the replies the gate makes itself (a delivery failure).
// Completed events are parsed and verified with the schemas' codec first: bad input never reaches
// the gate. The gate builds one Intake and wires it into every one of those roads.

import type { Reply } from '../api/types.ts';
import type { Message } from '../schemas/event.ts';
import type { KeyRing, ReceivedMessage } from '../schemas/index.ts';
import { parseCompleted } from '../schemas/index.ts';
import type { Verdict } from './identity.ts';
import type { ReplyIdentity } from './token-review.ts';
import type { OnReply } from './types.ts';

export type Handled =
  | { outcome: 'applied' | 'duplicate'; reply: Reply }
  | { outcome: 'rejected'; reply: Reply; reason: string }
  /** Refused before the gate saw it; `status` is the HTTP status the schemas chose for it. */
  | { outcome: 'invalid'; code: string; status: number; reason: string }
  | { outcome: 'transient'; reply: Reply; error: Error };

export interface HandleOptions {
  keys: KeyRing;
  maxBytes: number;
  onReply: OnReply;
}

export interface Intake {
  /** What the sinks are built with: the same keys, limit and recorder as every other road. */
  readonly options: HandleOptions;
  /** A completed event as it came off the wire. */
  message(message: Message): Promise<Handled>;
  /** A reply the gate built itself: nothing to parse or verify. */
  reply(reply: Reply): Promise<Handled>;
}

export function createIntake(options: HandleOptions): Intake {
  return {
    options,
    message: (message) => handleCompleted(message, options),
    reply: (reply) => deliver(reply, options.onReply),
  };
}

/**
 * Who sent a reply, for the roads that can tell (the HTTP sink): the gate's identity check and the
 * request's Authorization header. A hook's synchronous answer comes back on the gate's own call to
 * the URL the PrestartHook names, and NATS replies on credentials the NATS server checks, so those
 * roads pass none.
 */
export interface Sender {
  identity: ReplyIdentity;
  authorization: string | string[] | undefined;
}

/** A completed event as received: its headers as they came (the codec lowercases and joins them once). */
export async function handleCompleted(message: ReceivedMessage, opts: HandleOptions, sender?: Sender): Promise<Handled> {
  const parsed = parseCompleted(message, { keys: opts.keys, maxBytes: opts.maxBytes });
  if (!parsed.ok) return { outcome: 'invalid', ...parsed.error };
  if (sender) {
    // Before the state is touched: a reply that cannot be tied to the hook's identity changes nothing.
    let verdict: Verdict;
    try {
      verdict = await sender.identity.check(parsed.reply, sender.authorization);
    } catch (err) {
      return { outcome: 'transient', reply: parsed.reply, error: err instanceof Error ? err : new Error(String(err)) };
    }
    if (!verdict.ok) {
      return {
        outcome: 'invalid',
        code: verdict.status === 401 ? 'unauthenticated' : 'forbidden',
        status: verdict.status,
        reason: verdict.reason,
      };
    }
  }
  return deliver(parsed.reply, opts.onReply);
}

async function deliver(reply: Reply, onReply: OnReply): Promise<Handled> {
  let disposition: Awaited<ReturnType<OnReply>>;
  try {
    disposition = await onReply(reply);
  } catch (err) {
    return { outcome: 'transient', reply, error: err instanceof Error ? err : new Error(String(err)) };
  }
  switch (disposition.type) {
    case 'applied':
      return { outcome: 'applied', reply };
    case 'duplicate':
      return { outcome: 'duplicate', reply };
    case 'rejected':
      return { outcome: 'rejected', reply, reason: disposition.reason };
  }
}

/** HTTP answer for a handled event. 2xx carry no body: Knative's filter forwards a 2xx body as a reply and answers 502 for anything that is not a CloudEvent. */
export function httpAnswer(handled: Handled): { status: number; error?: string } {
  switch (handled.outcome) {
    case 'applied':
    case 'duplicate':
      // A duplicate must be 2xx too, or a Broker would keep redelivering it.
      return { status: 202 };
    case 'rejected':
      return { status: 422, error: handled.reason };
    case 'invalid':
      return { status: handled.status >= 400 && handled.status < 500 ? handled.status : 400, error: handled.reason };
    case 'transient':
      return { status: 503, error: 'the reply could not be recorded now; send it again' };
  }
}
