// Which HTTP agent carries a request to a Broker ingress: direct, or through an HTTP forward
// proxy. Broker addresses are cluster-local names, so a gate outside the cluster network (or in
// a cluster whose egress goes through a proxy) must send through one. By default the standard
// variables decide, per URL, as Go's net/http does for Knative's own components: HTTP_PROXY for
// http:, HTTPS_PROXY for https:, NO_PROXY exceptions (upper or lower case). Like Go, loopback
// destinations never go through a proxy, whatever is configured.
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import { HttpProxyAgent } from 'http-proxy-agent';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { getProxyForUrl } from 'proxy-from-env';

/**
 * How requests reach their target:
 *   - `undefined` (default): HTTP_PROXY / HTTPS_PROXY / NO_PROXY (or lower case), read per request;
 *   - a proxy URL: every request through that proxy (the variables are not read);
 *   - `false`: always direct;
 *   - a function: the proxy URL for a target URL; `undefined` or '' means direct.
 * Loopback targets (127.0.0.0/8, ::1, localhost) are always direct.
 */
export type ProxyOption = string | false | ((url: string) => string | undefined);

export interface Route {
  agent: http.Agent;
  /** The proxy carrying the request, credentials hidden, for messages; undefined when direct. */
  via?: string;
}

export interface ProxyRouter {
  route(target: URL): Route;
  /** Closes every pooled connection, direct and proxied. */
  destroy(): void;
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');
loopback.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/** As Go's httpproxy: "localhost" and loopback IPs are never proxied. */
export function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 0) return false;
  return loopback.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

/** The proxy URL for `target` under `option`, or undefined for a direct connection. */
export function proxyFor(option: ProxyOption | undefined, target: URL): string | undefined {
  if (option === false || isLoopback(target.hostname)) return undefined;
  const proxy = option === undefined ? getProxyForUrl(target.href) : typeof option === 'string' ? option : option(target.href);
  return proxy || undefined;
}

/** A proxy URL fit for logs and error messages: the password is replaced. */
export function redactProxy(proxy: string): string {
  try {
    const url = new URL(proxy);
    if (url.password) url.password = '***';
    return url.href.replace(/\/$/, '');
  } catch {
    return 'an invalid proxy URL';
  }
}

export function createProxyRouter(option: ProxyOption | undefined): ProxyRouter {
  const httpAgent = new http.Agent({ keepAlive: true });
  const httpsAgent = new https.Agent({ keepAlive: true });
  // One pooled agent per (target scheme, proxy): http targets go as absolute-form requests to the
  // proxy, https targets through a CONNECT tunnel.
  const proxied = new Map<string, http.Agent>();
  return {
    route(target) {
      const secure = target.protocol === 'https:';
      const proxy = proxyFor(option, target);
      if (proxy === undefined) return { agent: secure ? httpsAgent : httpAgent };
      const key = `${secure ? 'https' : 'http'} ${proxy}`;
      let agent = proxied.get(key);
      if (!agent) {
        agent = secure ? new HttpsProxyAgent(proxy, { keepAlive: true }) : new HttpProxyAgent(proxy, { keepAlive: true });
        proxied.set(key, agent);
      }
      return { agent, via: redactProxy(proxy) };
    },
    destroy() {
      httpAgent.destroy();
      httpsAgent.destroy();
      for (const agent of proxied.values()) agent.destroy();
      proxied.clear();
    },
  };
}
