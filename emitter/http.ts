// Direct HTTP delivery: the gate POSTs the request (binary mode) to the hook's URL and reads the
// answer itself. A hook either takes the request (202, reply later to a sink) or answers at once
// with the completed event (200 + CloudEvent). Each request has its own deadline covering the
// connection, the headers and the body, so one stuck hook cannot hold a gate worker.

import type { HookDelivery } from '../api/types.ts';
import type { CloudEventRecord } from '../schemas/event.ts';
import { bodyExcerpt } from '../schemas/http-binding.ts';
import { DEFAULT_MAX_REPLY_BYTES, toBinary } from '../schemas/index.ts';
import { type HttpAnswer, PostError, postMessage } from '../transport/http-client.ts';
import { classifyHookResponse } from './http-response.ts';
import { type SendOutcome, type Transport, TransportError } from './transport.ts';

export interface HttpTransportOptions {
  /** Whole-exchange deadline per request (connect, headers, body). Default 10 s. */
  timeoutMs?: number;
  /** Largest synchronous reply read from a hook. Default: the contract's reply limit (64 KiB). */
  maxReplyBytes?: number;
  userAgent?: string;
  /**
   * The bearer token for a hook, or undefined for none (sender identity: the gate's ServiceAccount
   * token for the hook's identity.audience). Asked per send: the source keeps and refreshes tokens.
   */
  bearerFor?: (hook: string, delivery: HookDelivery) => Promise<string | undefined>;
  /**
   * Where to connect for a URL, when not where its name resolves (a stand-in for cluster DNS for a
   * gate outside the cluster network); undefined: the URL as it is. Messages keep naming the URL.
   */
  serviceDns?: (url: URL) => URL | undefined;
}

export const DEFAULT_HTTP_TIMEOUT_MS = 10_000;

export function createHttpTransport(opts: HttpTransportOptions = {}): Transport {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS;
  const maxBytes = opts.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES;
  const userAgent = opts.userAgent ?? 'knative-prestart-gate';
  const closing = new AbortController();

  async function send(event: CloudEventRecord, delivery: HookDelivery, hook: string): Promise<SendOutcome> {
    const url = delivery.url;
    if (!url) throw new TransportError(`hook ${hook}: delivery.transport is http but delivery.url is not set`, false);
    let message = toBinary(event);
    if (opts.bearerFor) {
      let token: string | undefined;
      try {
        token = await opts.bearerFor(hook, delivery);
      } catch (err) {
        // No token now (the apiserver is unreachable): the request waits for the resend, never goes without.
        throw new TransportError(`hook ${hook}: no token for its audience: ${(err as Error).message}`, true);
      }
      if (token !== undefined) message = { ...message, headers: { ...message.headers, authorization: `Bearer ${token}` } };
    }
    let answer: HttpAnswer;
    try {
      const target = opts.serviceDns?.(new URL(url))?.href ?? url;
      answer = await postMessage(target, message, { timeoutMs, maxBytes, userAgent, signal: closing.signal });
    } catch (err) {
      if (!(err instanceof PostError)) throw err;
      // Only a reply over the limit is for good: the same hook would send the same reply again.
      throw new TransportError(`POST ${url}: ${err.message}`, err.failure !== 'too-large');
    }
    const { status, headers, body } = answer;
    const verdict = classifyHookResponse(status, headers, body.length, bodyExcerpt(body));
    switch (verdict.type) {
      case 'accepted':
        return { type: 'accepted' };
      case 'replied':
        return { type: 'replied', reply: { headers, body } };
      case 'retry':
        throw new TransportError(`POST ${url}: ${verdict.reason}`, true);
      case 'fail':
        throw new TransportError(`POST ${url}: ${verdict.reason}`, false);
    }
  }

  return {
    kind: 'http',
    send,
    async close() {
      closing.abort(new Error('transport closed'));
    },
  };
}
