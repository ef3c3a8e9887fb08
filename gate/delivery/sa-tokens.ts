// The gate's own ServiceAccount tokens, one per audience, for the requests it sends to hooks that
// name an audience (PrestartHook spec.identity.audience, direct HTTP). Obtained with the
// TokenRequest API (serviceaccounts/token create on the gate's ServiceAccount, config/300-rbac.yaml),
// kept and replaced at 80% of their lifetime so a request never leaves with a token about to
// expire, and never logged.
//
// A token the apiserver itself accepts would *be* the gate (its release verb, its reply-signing
// key, its webhook configurations) in the hands of whoever receives it. An audience is free text
// (identity.audience) or read from a Broker's status, so every freshly minted token is first shown
// to the apiserver with its own audiences (a TokenReview naming none): if it authenticates, it is
// thrown away and the audience refused (`refuseApiserverAudiences`). Asking the apiserver, rather
// than comparing with its issuer URL, also covers --api-audiences lists and issuers we cannot see.
import { AuthenticationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

export interface TokenSourceOptions {
  /** The gate's ServiceAccount. */
  serviceAccount: { namespace: string; name: string };
  /** Lifetime asked for; the apiserver may shorten it (never below 10 min). Default 1 h. */
  expirationSeconds?: number;
  now?: () => number;
}

export interface MintedToken {
  token: string;
  /** ms */
  expiresAt: number;
}

export type MintToken = (audience: string) => Promise<MintedToken>;

/** Refresh once this share of the token's life has passed. */
export const REFRESH_AT = 0.8;

/** When a token minted at `mintedAt` and valid until `expiresAt` is replaced. Pure. */
export function refreshAt(mintedAt: number, expiresAt: number): number {
  return mintedAt + Math.max(0, expiresAt - mintedAt) * REFRESH_AT;
}

export interface TokenSource {
  /** A token of the gate's ServiceAccount for `audience`; throws when the apiserver cannot mint one now. */
  token(audience: string): Promise<string>;
  /** Tokens minted so far. */
  readonly minted: number;
}

export function createTokenSource(mint: MintToken, now: () => number = Date.now): TokenSource {
  const held = new Map<string, { token: string; refreshAt: number; expiresAt: number }>();
  const minting = new Map<string, Promise<string>>();
  let minted = 0;
  return {
    get minted() {
      return minted;
    },
    token(audience) {
      const t = now();
      const have = held.get(audience);
      if (have && t < have.refreshAt) return Promise.resolve(have.token);
      let pending = minting.get(audience);
      if (!pending) {
        pending = (async () => {
          const mintedAt = now();
          const fresh = await mint(audience);
          minted++;
          held.set(audience, { token: fresh.token, expiresAt: fresh.expiresAt, refreshAt: refreshAt(mintedAt, fresh.expiresAt) });
          return fresh.token;
        })().finally(() => minting.delete(audience));
        minting.set(audience, pending);
      }
      // A refresh that fails while the old token still lives: use the old one, try again next time.
      if (have && t < have.expiresAt) return pending.catch(() => have.token);
      return pending;
    },
  };
}

/** Whether the apiserver takes `token` as a credential for itself. */
export type AcceptedByApiserver = (token: string) => Promise<boolean>;

/** A refused audience is not minted for again for this long (the apiserver's audiences change only with its flags). */
export const REFUSAL_KEPT_MS = 5 * 60_000;

/**
 * `mint`, but a token the apiserver accepts is never handed out: its audience is refused with one
 * reason, for REFUSAL_KEPT_MS.
 */
export function refuseApiserverAudiences(mint: MintToken, accepted: AcceptedByApiserver, now: () => number = Date.now): MintToken {
  const refused = new Map<string, number>();
  const refusal = (audience: string) =>
    new Error(
      `the apiserver accepts a token for the audience ${JSON.stringify(audience)}: one sent there would be the gate's own credentials, so the gate mints none for it`,
    );
  return async (audience) => {
    const until = refused.get(audience);
    if (until !== undefined && now() < until) throw refusal(audience);
    const minted = await mint(audience);
    if (await accepted(minted.token)) {
      refused.set(audience, now() + REFUSAL_KEPT_MS);
      throw refusal(audience);
    }
    refused.delete(audience);
    return minted;
  };
}

/** TokenReview naming no audience: the apiserver judges the token against its own (--api-audiences, else its issuer). */
export function kubeAcceptedByApiserver(kc: KubeConfig): AcceptedByApiserver {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return async (token) => (await api.createTokenReview({ body: { spec: { token } } })).status?.authenticated === true;
}

/** TokenRequest on the gate's ServiceAccount through `kc` (counted in prestart_gate_kube_requests_total). */
export function kubeMintToken(kc: KubeConfig, opts: TokenSourceOptions): MintToken {
  const core = kc.makeApiClient(CoreV1Api);
  const expirationSeconds = opts.expirationSeconds ?? 3600;
  const now = opts.now ?? Date.now;
  return async (audience) => {
    const answer = await core.createNamespacedServiceAccountToken({
      name: opts.serviceAccount.name,
      namespace: opts.serviceAccount.namespace,
      body: { spec: { audiences: [audience], expirationSeconds } },
    });
    const token = answer.status?.token;
    if (!token) throw new Error(`TokenRequest for ${opts.serviceAccount.namespace}/${opts.serviceAccount.name} returned no token`);
    const exp = answer.status?.expirationTimestamp;
    const expiresAt = exp ? new Date(exp).getTime() : now() + expirationSeconds * 1000;
    return { token, expiresAt };
  };
}
