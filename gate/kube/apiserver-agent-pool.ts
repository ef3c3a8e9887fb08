// The apiserver agent pool: the gate's connections to the apiserver, kept and reused. client-node
// 1.x builds a new https.Agent for every API request (KubeConfig.applySecurityAuthentication), so
// every status write, patch and read paid a TCP connect and a TLS handshake with client-certificate
// verification, on both sides: under a burst of releases on a small machine that, not the writes,
// was most of the time. One keep-alive agent per TLS identity carries them all.
//
// The requests go out through node:https here, not client-node's node-fetch 2: with a
// keep-alive agent, node-fetch 2 reports a chunked response as "Premature close" when the
// socket it came on has already been handed to the next request (its end-of-body check looks
// at the socket's listeners), which fails writes under a burst of replies.
import { createHash } from 'node:crypto';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { type PromiseHttpLibrary, type RequestContext, ResponseContext } from '@kubernetes/client-node';

/**
 * Idle connections are closed after this long, before the apiserver's own idle timeout (90 s):
 * a request never goes out on a connection the server is closing at that instant.
 */
const IDLE_MS = 60_000;
/**
 * Connections per identity at most: a burst (a hundred replies at once) waits a moment for a
 * kept connection rather than opening a hundred and paying a hundred handshakes.
 */
const MAX_CONNECTIONS = 32;

export class ApiserverAgentPool {
  private readonly agents = new Map<string, Agent>();

  /** Puts the pooled agent for the request's TLS settings in place of the one-off agent client-node made. */
  reuse(context: RequestContext): void {
    const made = context.getAgent();
    // A proxy agent (cluster.proxyUrl) or a plain-HTTP one: left as client-node made it.
    if (!made || made.constructor !== Agent) return;
    const options = (made as Agent).options;
    const key = fingerprint(options);
    let pooled = this.agents.get(key);
    if (!pooled) {
      pooled = new Agent({ ...options, keepAlive: true, timeout: IDLE_MS, maxSockets: MAX_CONNECTIONS });
      this.agents.set(key, pooled);
    }
    context.setAgent(pooled);
  }

  /** Closes every kept connection. */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** Hears how long each request took, answered (`status`) or not (`status` 0). */
export type RequestObserver = (method: string, path: string, status: number, seconds: number) => void;

/** client-node's HTTP library (the generated API clients' transport), over node:http(s) and the pool. */
export class PooledHttp implements PromiseHttpLibrary {
  constructor(
    private readonly pool: ApiserverAgentPool,
    private readonly observe?: RequestObserver,
  ) {}

  async send(context: RequestContext): Promise<ResponseContext> {
    const started = performance.now();
    const url = new URL(context.getUrl());
    try {
      const response = await this.exchange(context, url);
      this.observe?.(context.getHttpMethod(), url.pathname, response.httpStatusCode, (performance.now() - started) / 1000);
      return response;
    } catch (err) {
      this.observe?.(context.getHttpMethod(), url.pathname, 0, (performance.now() - started) / 1000);
      throw err;
    }
  }

  private exchange(context: RequestContext, url: URL): Promise<ResponseContext> {
    this.pool.reuse(context);
    const body = context.getBody();
    const request = url.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        { method: context.getHttpMethod(), headers: context.getHeaders(), agent: context.getAgent(), signal: context.getSignal() },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            const data = Buffer.concat(chunks);
            resolve(
              new ResponseContext(res.statusCode ?? 0, flatHeaders(res.headers), {
                text: async () => data.toString('utf8'),
                binary: async () => data,
              }),
            );
          });
          // After 'end' this changes nothing; before it, the body was cut short.
          res.on('close', () => {
            if (!res.complete)
              reject(new Error(`${context.getHttpMethod()} ${url.pathname}: the connection closed before the response ended`));
          });
        },
      );
      req.on('error', reject);
      if (body === undefined || typeof body === 'string') req.end(body);
      else req.end(String(body));
    });
  }
}

function flatHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

/** What makes two agents' connections interchangeable: the CA, the client identity, the TLS knobs. */
function fingerprint(o: Agent['options']): string {
  const hash = createHash('sha256');
  const feed = (part: unknown): void => {
    if (Array.isArray(part)) for (const p of part) feed(p);
    else if (part === undefined) hash.update('\0');
    else if (typeof part === 'string' || part instanceof Uint8Array) hash.update(part);
    else hash.update(JSON.stringify(part));
    hash.update('\x01');
  };
  for (const part of [o.ca, o.cert, o.key, o.pfx, o.passphrase, o.servername, String(o.rejectUnauthorized)]) feed(part);
  return hash.digest('hex');
}
