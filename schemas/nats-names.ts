// The names and settings of the JetStream side of the contract (streams, durables, inboxes, where
// to connect), apart from the nats client itself (nats.ts), so that what only names them (the
// CLI's defaults, a gate without NATS) does not load the client.
import type { ConnectionOptions, NatsConnection } from 'nats';
import type { NatsSecurity } from './nats-auth.ts';

export interface StreamSpec {
  name: string;
  /** The stream captures `<subjectPrefix>.>`; a hook's own subject is `<subjectPrefix>.<hook>`. */
  subjectPrefix: string;
  /** How long a message is kept. */
  maxAgeMs: number;
  /** Publishes with one message id inside this window are stored once. */
  duplicateWindowMs: number;
}

const MINUTE = 60_000;

/**
 * The gate's streams. A request is resent with the same id while unanswered (every
 * resendInterval), so its window is wide; a hook resending a reply does so within seconds
 * (JetStream's default of 2 min). A day covers any hook's timeout and restart.
 */
export const STREAMS = {
  requests: { name: 'PRESTART_REQUESTS', subjectPrefix: 'prestart.requests', maxAgeMs: 24 * 60 * MINUTE, duplicateWindowMs: 10 * MINUTE },
  replies: { name: 'PRESTART_REPLIES', subjectPrefix: 'prestart.replies', maxAgeMs: 24 * 60 * MINUTE, duplicateWindowMs: 2 * MINUTE },
} as const satisfies Record<string, StreamSpec>;

/** The durable consumer on PRESTART_REPLIES that every gate replica pulls from. */
export const GATE_REPLIES_DURABLE = 'prestart-gate';
/** The gate's inbox prefix: its JetStream API answers and pulled replies arrive below it. */
export const GATE_INBOX_PREFIX = '_INBOX.prestart-gate';

/** A hook's durable consumer on PRESTART_REQUESTS, shared by its replicas, unless it names another. */
export function hookDurable(hook: string): string {
  return `prestart-hook-${hook}`;
}

/** A hook's inbox prefix: one token per durable (durable names hold no dots), so no hook's covers another's. */
export function hookInboxPrefix(durable: string): string {
  return `_INBOX.${durable}`;
}

/** Where to reach NATS: servers to connect to, or a connection that stays the caller's. */
export interface NatsTarget {
  /**
   * NATS server URL(s), e.g. nats://127.0.0.1:4222, or several comma-separated (the `nats` CLI's
   * NATS_URL form) for a cluster. Ignored when `connection` is given.
   */
  servers?: string | string[];
  /** Credentials, TLS and inbox of a connection opened here. Ignored when `connection` is given. */
  security?: NatsSecurity;
  /** An existing connection to use; it is never closed here. */
  connection?: NatsConnection;
  /** Further nats.js options for a connection opened here (they win over `security`). */
  connectionOptions?: Omit<ConnectionOptions, 'servers'>;
}

/**
 * Every server of `servers`, a comma-separated list taken apart: nats.js takes one string as one
 * URL, and `--nats`, NATS_URL and a Secret hold one string. The client connects to one of them
 * (in random order, so a fleet spreads) and, when it is lost, goes on to the others.
 */
export function natsServerList(servers: string | readonly string[]): string[] {
  return (typeof servers === 'string' ? [servers] : [...servers])
    .flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** JetStream keeps at most this many copies of a stream. */
export const MAX_REPLICAS = 5;

export function checkNatsTarget(target: NatsTarget, who: string): void {
  if (!target.connection && !target.servers) throw new Error(`${who}: servers or connection is required`);
}
