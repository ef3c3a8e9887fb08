// proxy-from-env 2.x is ESM and ships no types; this is its one export.
declare module 'proxy-from-env' {
  /** The proxy URL for `url` from *_PROXY / ALL_PROXY and NO_PROXY; '' means no proxy. */
  export function getProxyForUrl(url: string | URL): string;
}
