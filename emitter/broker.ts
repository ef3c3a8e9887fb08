// Delivery through a Knative Broker: the gate POSTs the request (binary mode) to the Broker's
// ingress; a Trigger routes it to the hook, and the hook's `completed` event comes back through
// the Broker to a Trigger on the gate's sink. The ingress address comes from broker-address.ts.
//
// When is a request "delivered"? With a durable channel (Kafka, NATS JetStream) the ingress
// answers 202 once the event is stored. With the default InMemoryChannel the ingress answers only
// after every matching subscriber has answered (up to 15 min), so waiting for the status would
// tie a gate worker to the hook's running time. The choice made here:
//   - the request counts as accepted as soon as its body has been fully handed to the OS (which
//     node:http tells and fetch does not, hence no shared POST helper here) and the
//     ingress has neither failed the connection nor answered an error within a short response
//     window (`responseTimeoutMs`, 2 s by default);
//   - a request still unanswered after that window is NOT aborted: closing the connection would
//     cancel the ingress's request context and with it the fan-out to the hook. It is left open
//     in the background (bounded by `backgroundTimeoutMs`), its late status is logged and passed
//     to `onBackgroundResult`, and nothing else depends on it;
//   - whatever is lost that way (ingress failing late, channel dropping the event) is covered by
//     the gate's resend rule: an unanswered request is sent again every `resendInterval` with the
//     same CloudEvent id, which the hook dedupes.
// Connection failures and 404/408/409/429/5xx answers within the window are retried here with
// exponential backoff and jitter, bounded in tries and time; a 404 or a connection failure also
// drops the cached ingress address. The ingress's answer body is never a reply.
//
// Sender identity (Knative Eventing with `authentication-oidc: enabled`): a Broker whose status
// announces an audience gets `Authorization: Bearer <token>` for that audience, from `bearerFor`
// (the gate's ServiceAccount token, minted with TokenRequest and refreshed before it expires,
// gate/delivery/sa-tokens.ts), as Knative's own sources send theirs. No audience, no token. A request
// for which no token can be had now is not sent (retried, then left to the resend): it would only
// be refused. A 401 drops the cached address, since the Broker's audience may have changed.
//
// Broker addresses are cluster-local names: where they are reached through an HTTP forward proxy
// (HTTP_PROXY / HTTPS_PROXY / NO_PROXY by default, or the `proxy` option) all of the above holds
// unchanged through the proxy, and every reason names the proxy, since a 502/503 or a refused
// connection may be the proxy's rather than the ingress's.
import http from 'node:http';
import https from 'node:https';
import pino, { type Logger } from 'pino';
import type { HookDelivery } from '../api/types.ts';
import type { CloudEventRecord, Message } from '../schemas/event.ts';
import { bodyExcerpt, describeNetworkError } from '../schemas/http-binding.ts';
import { toBinary } from '../schemas/index.ts';
import { readLimited } from '../transport/http-client.ts';
import { type BackoffPolicy, DEFAULT_BACKOFF, RetriesExhausted, retry } from '../transport/retry.ts';
import { AddressCache, type BrokerAddress, kubeBrokerResolver, type ResolveBrokerUrl } from './broker-address.ts';
import { classifyErrorStatus } from './http-response.ts';
import { createProxyRouter, type ProxyOption, type Route } from './proxy.ts';
import { type SendOutcome, type Transport, TransportError } from './transport.ts';

export interface BackgroundResult {
  hook: string;
  eventId: string;
  url: string;
  /** The ingress's late status, when it answered. */
  status?: number;
  /** Why the request ended without a status (connection error, background timeout, close). */
  error?: string;
}

export interface BrokerTransportOptions {
  /** Looks up a Broker's ingress URL; default: the Broker's status.address.url via the Kubernetes API. */
  resolveBrokerUrl?: ResolveBrokerUrl;
  /** How long a resolved address is reused. Default 30 s. */
  addressTtlMs?: number;
  /** Deadline for connecting and writing the request. Default 5 s. */
  sendTimeoutMs?: number;
  /** How long to wait for the ingress's status once the request is written. Default 2 s. */
  responseTimeoutMs?: number;
  /** How long an unanswered request is kept open in the background. Default 15 min (Knative's own bound). */
  backgroundTimeoutMs?: number;
  retry?: Partial<BackoffPolicy>;
  logger?: Logger;
  userAgent?: string;
  /** Told how every request left open in the background ended. */
  onBackgroundResult?: (result: BackgroundResult) => void;
  /**
   * The HTTP forward proxy to the ingress. Default: HTTP_PROXY / HTTPS_PROXY / NO_PROXY, as
   * Knative's Go components; loopback addresses are always direct. See ProxyOption.
   */
  proxy?: ProxyOption;
  /**
   * A token for `audience` (the Broker's status.address.audience), sent as the Bearer: Eventing's
   * ingress checks it when its sender identity is on. Asked per send; the source caches and
   * refreshes. Absent: requests go without a token, and an OIDC Broker answers 401.
   */
  bearerFor?: (audience: string) => Promise<string>;
}

type AttemptResult =
  | { type: 'accepted'; pending: boolean }
  | { type: 'retry'; reason: string; forgetAddress: boolean }
  | { type: 'fail'; reason: string };

const EXCERPT_BYTES = 4096;

export function createBrokerTransport(opts: BrokerTransportOptions = {}): Transport {
  const sendTimeoutMs = opts.sendTimeoutMs ?? 5_000;
  const responseTimeoutMs = opts.responseTimeoutMs ?? 2_000;
  const backgroundTimeoutMs = opts.backgroundTimeoutMs ?? 15 * 60_000;
  const policy: BackoffPolicy = { ...DEFAULT_BACKOFF, ...opts.retry };
  const log = opts.logger ?? pino({ name: 'broker-transport' });
  const userAgent = opts.userAgent ?? 'knative-prestart-gate';
  const addresses = new AddressCache(opts.resolveBrokerUrl ?? kubeBrokerResolver(), opts.addressTtlMs ?? 30_000);
  const router = createProxyRouter(opts.proxy);
  const background = new Set<http.ClientRequest>();
  const closing = new AbortController();

  function attempt(url: string, message: Message, hook: string, eventId: string): Promise<AttemptResult> {
    return new Promise((resolve) => {
      let target: URL;
      try {
        target = new URL(url);
      } catch {
        resolve({ type: 'fail', reason: `invalid Broker URL ${JSON.stringify(url)}` });
        return;
      }
      let route: Route;
      try {
        route = router.route(target);
      } catch (err) {
        // Only a malformed proxy URL gets here; sending again cannot fix the configuration.
        resolve({ type: 'fail', reason: `cannot use the proxy configured for ${target.origin}: ${(err as Error).message}` });
        return;
      }
      const via = route.via === undefined ? '' : ` via proxy ${route.via}`;
      const secure = target.protocol === 'https:';
      const body = typeof message.body === 'string' ? Buffer.from(message.body) : message.body;
      const req = (secure ? https : http).request(target, {
        method: 'POST',
        agent: route.agent,
        headers: { ...message.headers, 'content-length': String(body.length), 'user-agent': userAgent },
      });
      let settled = false;
      let written = false;
      let responseTimer: NodeJS.Timeout | undefined;
      let backgroundTimer: NodeJS.Timeout | undefined;
      const settle = (r: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(sendTimer);
        clearTimeout(responseTimer);
        resolve(r);
      };
      const finishBackground = (result: Omit<BackgroundResult, 'hook' | 'eventId' | 'url'>) => {
        if (!background.delete(req)) return;
        clearTimeout(backgroundTimer);
        const full = { hook, eventId, url, ...result };
        if (result.status !== undefined && result.status >= 200 && result.status < 300) {
          log.debug(full, 'Broker ingress answered a backgrounded request');
        } else {
          log.warn(full, 'Broker ingress did not take a backgrounded request; the gate resends it when unanswered');
        }
        opts.onBackgroundResult?.(full);
      };
      const sendTimer = setTimeout(() => {
        req.destroy(new Error(`could not connect and send the request within ${sendTimeoutMs} ms`));
      }, sendTimeoutMs);

      req.on('finish', () => {
        written = true;
        clearTimeout(sendTimer);
        if (settled) return;
        responseTimer = setTimeout(() => {
          background.add(req);
          backgroundTimer = setTimeout(() => {
            req.destroy(new Error(`no answer within ${backgroundTimeoutMs} ms`));
          }, backgroundTimeoutMs);
          settle({ type: 'accepted', pending: true });
        }, responseTimeoutMs);
      });

      req.on('response', (res) => {
        clearTimeout(responseTimer);
        const status = res.statusCode ?? 0;
        if (settled) {
          res.resume();
          finishBackground({ status });
          return;
        }
        if (status >= 200 && status < 300) {
          // The ingress's body is not a reply; drain it so the socket goes back to the pool.
          res.resume();
          settle({ type: 'accepted', pending: false });
          return;
        }
        // The excerpt is read within the response window too; a body cut short yields none.
        const excerptTimer = setTimeout(() => res.destroy(), responseTimeoutMs);
        void readLimited(res, EXCERPT_BYTES, 'truncate')
          .catch(() => new Uint8Array(0))
          .then((body) => {
            clearTimeout(excerptTimer);
            settle(classifyBrokerStatus(status, bodyExcerpt(body), route.via));
          });
      });

      req.on('error', (err) => {
        if (settled) {
          finishBackground({ error: `${describeNetworkError(err)}${via}` });
          return;
        }
        const reason = written
          ? `the connection failed after the request was sent${via}: ${describeNetworkError(err)}`
          : `${describeNetworkError(err)}${via}`;
        settle({ type: 'retry', reason, forgetAddress: true });
      });

      req.end(body);
    });
  }

  /** One try: resolve the address (cached), POST; throws TransportError for anything short of accepted. */
  async function once(broker: { namespace: string; name: string; url?: string }, message: Message, hook: string, eventId: string) {
    const brokerRef = `Broker ${broker.namespace}/${broker.name}`;
    let address: BrokerAddress;
    try {
      address = broker.url ? { url: broker.url } : await addresses.get(broker.namespace, broker.name);
    } catch (err) {
      if (err instanceof TransportError && !err.retriable) throw err;
      throw new TransportError(`${brokerRef}: cannot resolve the ingress address: ${(err as Error).message}`, true);
    }
    const url = address.url;
    const result = await attempt(url, await withBearer(message, address.audience, brokerRef), hook, eventId);
    if (result.type === 'accepted') {
      if (result.pending) log.debug({ hook, eventId, broker: brokerRef }, 'request sent; ingress still busy, not waiting');
      return;
    }
    const where = `${brokerRef} (${url})`;
    if (result.type === 'fail') throw new TransportError(`${where}: ${result.reason}`, false);
    if (result.forgetAddress && !broker.url) addresses.forget(broker.namespace, broker.name);
    throw new TransportError(`${where}: ${result.reason}`, true);
  }

  /** The message with the token for the Broker's audience; unchanged when it announces none. */
  async function withBearer(message: Message, audience: string | undefined, brokerRef: string): Promise<Message> {
    if (audience === undefined || !opts.bearerFor) return message;
    let token: string;
    try {
      token = await opts.bearerFor(audience);
    } catch (err) {
      throw new TransportError(`${brokerRef}: no token for its audience ${audience}: ${(err as Error).message}`, true);
    }
    return { ...message, headers: { ...message.headers, authorization: `Bearer ${token}` } };
  }

  async function send(event: CloudEventRecord, delivery: HookDelivery, hook: string): Promise<SendOutcome> {
    const broker = delivery.broker;
    if (!broker?.name || !broker.namespace) {
      throw new TransportError(`hook ${hook}: delivery.transport is broker but delivery.broker.name/namespace is not set`, false);
    }
    const target = { namespace: broker.namespace, name: broker.name, ...(broker.url ? { url: broker.url } : {}) };
    const message = toBinary(event);
    try {
      await retry(() => once(target, message, hook, event.id), policy, {
        signal: closing.signal,
        retriable: (err) => !(err instanceof TransportError) || err.retriable,
        onRetry: (err, delay) => log.debug({ hook, eventId: event.id, reason: (err as Error).message, delay }, 'retrying Broker delivery'),
      });
      return { type: 'accepted' };
    } catch (err) {
      if (closing.signal.aborted) throw new TransportError(`Broker ${broker.namespace}/${broker.name}: transport closed`, true);
      if (err instanceof RetriesExhausted) throw new TransportError(err.message, true);
      throw err;
    }
  }

  return {
    kind: 'broker',
    send,
    async close() {
      closing.abort(new Error('transport closed'));
      for (const req of [...background]) req.destroy(new Error('transport closed'));
      router.destroy();
    },
  };
}

/**
 * The ingress answers only about itself: 404 means the Broker is (not yet, or no longer) there;
 * 401 that the token (or its audience) is not what the Broker wants now.
 * Through a proxy (`via`) the answer may be the proxy's own (502/503: no route, upstream down),
 * retriable like the ingress's 5xx; the reason names the proxy.
 */
export function classifyBrokerStatus(status: number, excerpt: string, via?: string): AttemptResult {
  const peer = via === undefined ? 'Broker ingress' : `Broker ingress via proxy ${via}`;
  if (status === 404) {
    return { type: 'retry', reason: `${peer} answered 404${excerpt ? `: ${excerpt}` : ''}`, forgetAddress: true };
  }
  // Eventing's OIDC check: no token, or one for an audience the Broker no longer announces (it was
  // recreated, or identity was just turned on): read the address again and send again.
  if (status === 401) {
    return { type: 'retry', reason: `${peer} answered 401 (sender identity)${excerpt ? `: ${excerpt}` : ''}`, forgetAddress: true };
  }
  const verdict = classifyErrorStatus(status, excerpt, peer);
  if (verdict.type === 'retry') return { type: 'retry', reason: verdict.reason, forgetAddress: false };
  if (verdict.type === 'fail') return verdict;
  return { type: 'accepted', pending: false };
}
