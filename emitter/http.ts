// Direct HTTP delivery: the gate POSTs the request (binary mode) to the hook's URL and reads the
// answer itself. A hook either takes the request (202, reply later to a sink) or answers at once
// with the completed event (200 + CloudEvent). Each request has its own deadline covering the
// connection, the headers and the body, so one stuck hook cannot hold a gate worker.

import type { HookDelivery } from '../api/types.ts';
import type { CloudEventRecord } from '../schemas/event.ts';
import { bodyExcerpt, describeNetworkError, lowercaseHeaders } from '../schemas/http-binding.ts';
import { DEFAULT_MAX_REPLY_BYTES, toBinary } from '../schemas/index.ts';
import { classifyHookResponse } from './http-response.ts';
import { type SendOutcome, type Transport, TransportError } from './transport.ts';

export interface HttpTransportOptions {
  /** Whole-exchange deadline per request (connect, headers, body). Default 10 s. */
  timeoutMs?: number;
  /** Largest synchronous reply read from a hook. Default: the contract's reply limit (64 KiB). */
  maxReplyBytes?: number;
  userAgent?: string;
}

export const DEFAULT_HTTP_TIMEOUT_MS = 10_000;

export function createHttpTransport(opts: HttpTransportOptions = {}): Transport {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS;
  const maxReplyBytes = opts.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES;
  const userAgent = opts.userAgent ?? 'knative-prestart-gate';
  const inflight = new Set<AbortController>();

  async function send(event: CloudEventRecord, delivery: HookDelivery, hook: string): Promise<SendOutcome> {
    const url = delivery.url;
    if (!url) throw new TransportError(`hook ${hook}: delivery.transport is http but delivery.url is not set`, false);
    const message = toBinary(event);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new DeadlineExceeded(timeoutMs)), timeoutMs);
    inflight.add(controller);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { ...message.headers, 'user-agent': userAgent },
        // A copy typed over a plain ArrayBuffer, which is what fetch's BodyInit accepts.
        body: typeof message.body === 'string' ? message.body : new Uint8Array(message.body),
        redirect: 'manual',
        signal: controller.signal,
      });
      const headers = lowercaseHeaders(response.headers);
      const body = await readLimited(response, maxReplyBytes, url);
      const verdict = classifyHookResponse(response.status, headers, body.length, bodyExcerpt(body));
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
    } catch (err) {
      throw asTransportError(err, url, controller.signal);
    } finally {
      clearTimeout(timer);
      inflight.delete(controller);
    }
  }

  return {
    kind: 'http',
    send,
    async close() {
      for (const c of inflight) c.abort(new Error('transport closed'));
    },
  };
}

class DeadlineExceeded extends Error {
  constructor(readonly ms: number) {
    super(`no complete answer within ${ms} ms`);
  }
}

class TooLargeError extends Error {}

function asTransportError(err: unknown, url: string, signal: AbortSignal): TransportError {
  if (err instanceof TransportError) return err;
  if (err instanceof TooLargeError) return new TransportError(err.message, false);
  if (signal.aborted && signal.reason instanceof DeadlineExceeded) {
    return new TransportError(`POST ${url}: ${signal.reason.message}`, true);
  }
  if (signal.aborted) return new TransportError(`POST ${url}: aborted (${String(signal.reason)})`, true);
  return new TransportError(`POST ${url}: ${describeNetworkError(err)}`, true);
}

async function readLimited(response: Response, max: number, url: string): Promise<Uint8Array> {
  if (!response.body) return new Uint8Array(0);
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(declared) && declared > max) {
    await response.body.cancel().catch(() => {});
    throw new TooLargeError(`POST ${url}: the answer (${declared} bytes) is larger than the ${max}-byte limit`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.length;
    if (size > max) {
      throw new TooLargeError(`POST ${url}: the answer is larger than the ${max}-byte limit`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}
