// The NATS permissions each side of the contract needs, as subject lists for a nats-server
// `permissions` block or a user JWT: the gate's and one hook's. docs/protocol.md prints the same
// lists, and a test enforces them on a real nats-server.
import { GATE_INBOX_PREFIX, GATE_REPLIES_DURABLE, hookDurable, hookInboxPrefix, STREAMS } from './nats-names.ts';

/** Subjects an identity may publish to and subscribe to, for a nats-server `permissions` block or a user JWT. */
export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

const API = '$JS.API';

/**
 * What the gate needs, and no more: publish requests on `prestart.requests.>`; create, read and
 * widen (never delete or purge) both streams; its own durable on the replies, read and acked;
 * answers in its own inbox. It subscribes to no request or reply subject itself.
 */
export function gateNatsPermissions(opts: { durable?: string; inboxPrefix?: string } = {}): NatsPermissions {
  const durable = opts.durable ?? GATE_REPLIES_DURABLE;
  const { requests, replies } = STREAMS;
  return {
    publish: [
      `${requests.subjectPrefix}.>`,
      ...[requests.name, replies.name].flatMap((s) => [
        `${API}.STREAM.INFO.${s}`,
        `${API}.STREAM.CREATE.${s}`,
        `${API}.STREAM.UPDATE.${s}`,
      ]),
      `${API}.CONSUMER.INFO.${replies.name}.${durable}`,
      `${API}.CONSUMER.CREATE.${replies.name}.${durable}.${replies.subjectPrefix}.>`,
      `${API}.CONSUMER.MSG.NEXT.${replies.name}.${durable}`,
      `$JS.ACK.${replies.name}.${durable}.>`,
    ],
    subscribe: [`${opts.inboxPrefix ?? GATE_INBOX_PREFIX}.>`],
  };
}

/**
 * What one hook needs: create (or re-tune) its own durable, and only with its own subject as the
 * filter (the subject names the filter, and the server refuses a config whose filter differs);
 * read it and ack what it pulled; publish replies on its own reply subject; answers in its own
 * inbox. No stream API at all: the gate creates the streams.
 */
export function hookNatsPermissions(
  hook: string,
  opts: { durable?: string; subject?: string; inboxPrefix?: string } = {},
): NatsPermissions {
  const durable = opts.durable ?? hookDurable(hook);
  const subject = opts.subject ?? `${STREAMS.requests.subjectPrefix}.${hook}`;
  const stream = STREAMS.requests.name;
  return {
    publish: [
      `${API}.CONSUMER.CREATE.${stream}.${durable}.${subject}`,
      `${API}.CONSUMER.INFO.${stream}.${durable}`,
      `${API}.CONSUMER.MSG.NEXT.${stream}.${durable}`,
      `$JS.ACK.${stream}.${durable}.>`,
      `${STREAMS.replies.subjectPrefix}.${hook}`,
    ],
    subscribe: [`${opts.inboxPrefix ?? hookInboxPrefix(durable)}.>`],
  };
}
