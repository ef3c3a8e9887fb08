// A stand-in for the gate's reply sink on 127.0.0.1: it checks every completed event exactly as
// the gate does (its own KeyRing verifies the replyid) and keeps what it saw, refused ones too,
// for the conformance checker and the simulator to judge.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Reply } from '../../api/types.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { flattenHeaders } from '../../schemas/http-binding.ts';
import {
  type ContractError,
  DEFAULT_MAX_REPLY_BYTES,
  type KeyRing,
  parseCompleted,
  parseMessage,
  type ReceivedMessage,
} from '../../schemas/index.ts';

export interface ReceivedReply {
  /** Date.now() when it arrived. */
  at: number;
  /** Posted to the sink, or the body of a 200 answer. */
  via: 'sink' | 'answer';
  /** The CloudEvent, whenever it decoded as one (also when the gate would refuse it). */
  event?: CloudEventRecord;
  /** The verified reply, when the gate would take it. */
  reply?: Reply;
  /** Why the gate would refuse it. */
  error?: ContractError;
  /** Posted to the sink: whether it carried `Authorization: Bearer <token>` (R10; the token itself is not kept). */
  bearer?: boolean;
}

/** What the gate's sink would make of a message: pure, so answers in a response body are judged the same way. */
export function readReply(message: ReceivedMessage, keys: KeyRing, via: ReceivedReply['via'], at = Date.now()): ReceivedReply {
  const parsed = parseCompleted(message, { keys });
  if (parsed.ok) return { at, via, event: parsed.event, reply: parsed.reply };
  const decoded = parseMessage(message, { maxBytes: DEFAULT_MAX_REPLY_BYTES * 4 });
  return { at, via, error: parsed.error, ...(decoded.ok ? { event: decoded.event } : {}) };
}

export interface ReplySink {
  /** http://127.0.0.1:PORT/ — goes into data.replyTo. */
  url: string;
  readonly replies: readonly ReceivedReply[];
  /** The first reply (already seen or still to come) that matches, or undefined after timeoutMs. */
  waitFor(match: (r: ReceivedReply) => boolean, timeoutMs: number): Promise<ReceivedReply | undefined>;
  /** Called for every reply from now on. */
  onReply(listener: (r: ReceivedReply) => void): void;
  close(): Promise<void>;
}

export async function startReplySink(keys: KeyRing, host = '127.0.0.1'): Promise<ReplySink> {
  const replies: ReceivedReply[] = [];
  const listeners = new Set<(r: ReceivedReply) => void>();
  const app = express();
  app.post('/{*path}', express.raw({ type: () => true, limit: DEFAULT_MAX_REPLY_BYTES }), (req, res) => {
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const received: ReceivedReply = {
      ...readReply({ headers: flattenHeaders(req.headers), body }, keys, 'sink'),
      bearer: /^Bearer +\S+$/i.test(req.get('authorization') ?? ''),
    };
    replies.push(received);
    for (const listener of listeners) listener(received);
    // As the gate answers: an empty 202 for a reply it takes, the reason for one it refuses.
    if (received.error) res.status(received.error.status).json({ error: received.error.reason, code: received.error.code });
    else res.status(202).end();
  });
  app.use((err: { status?: number; message?: string }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(err.status ?? 400).json({ error: err.message ?? 'bad request' });
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(0, host, (err?: Error) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/`,
    replies,
    onReply(listener) {
      listeners.add(listener);
    },
    waitFor(match, timeoutMs) {
      const seen = replies.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => {
        const listener = (r: ReceivedReply) => {
          if (!match(r)) return;
          finish(r);
        };
        const timer = setTimeout(() => finish(undefined), timeoutMs);
        const finish = (r: ReceivedReply | undefined) => {
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(r);
        };
        listeners.add(listener);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
