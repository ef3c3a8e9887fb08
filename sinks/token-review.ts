// Sender identity on the reply path, the shell: asks the apiserver (TokenReview) who a reply's
// bearer token belongs to, and keeps the answer until the token expires, so a hook's token is
// reviewed once per lifetime and the steady state of a reply is a hash and a map lookup.
import { createHash } from 'node:crypto';
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { HookIdentity, Reply } from '../api/types.ts';
import {
  bearerToken,
  type IdentityMode,
  judge,
  keepUntil,
  precheck,
  type ReplyTriggerIdentity,
  type Review,
  type Verdict,
} from './identity.ts';

export type ReviewToken = (token: string, audience: string) => Promise<Review>;

export interface ReplyIdentityOptions {
  mode: Exclude<IdentityMode, 'off'>;
  /** The audience the sink announces and reviews tokens for. */
  audience: string;
  /** The PrestartHook's identity as it is now (the gate's hooks cache): a changed ServiceAccount counts at once. */
  identityOf: (hook: string) => HookIdentity | undefined;
  /** Whether a PrestartHook of that name exists now; default: always. In declared mode a reply for one that does not is refused. */
  hookExists?: (hook: string) => boolean;
  /**
   * Broker hooks: the gate's reply Trigger on the hook's Broker and its OIDC ServiceAccount, read
   * from the Trigger's status (triggers/reply-identity.ts); undefined for other hooks. Asked only
   * for a reply that carries a token. Absent: Broker-delivered replies are not recognised.
   */
  replyTriggerOf?: (hook: string) => Promise<ReplyTriggerIdentity | undefined>;
  review: ReviewToken;
  /** Reviews kept at most (oldest dropped first). Default 10 000: a hook's replica has one token at a time. */
  maxEntries?: number;
  now?: () => number;
}

/** Checks a reply's sender; throws when the apiserver cannot answer now (the sink answers 503). */
export interface ReplyIdentity {
  readonly mode: Exclude<IdentityMode, 'off'>;
  readonly audience: string;
  check(reply: Reply, authorization: string | string[] | undefined): Promise<Verdict>;
  /** TokenReviews made so far (the cache's misses). */
  readonly reviews: number;
}

export const DEFAULT_REVIEW_CACHE_ENTRIES = 10_000;

export function createReplyIdentity(opts: ReplyIdentityOptions): ReplyIdentity {
  const now = opts.now ?? Date.now;
  const max = opts.maxEntries ?? DEFAULT_REVIEW_CACHE_ENTRIES;
  // Keyed by a hash of the token: the map never holds a credential.
  const cache = new Map<string, { review: Review; until: number }>();
  // One review per token in flight, however many replies carry it at once.
  const inFlight = new Map<string, Promise<Review>>();
  let reviews = 0;

  async function reviewed(token: string): Promise<Review> {
    const key = createHash('sha256').update(token).digest('base64url');
    const t = now();
    const hit = cache.get(key);
    if (hit && hit.until > t) return hit.review;
    if (hit) cache.delete(key);
    let pending = inFlight.get(key);
    if (!pending) {
      reviews++;
      pending = opts.review(token, opts.audience).finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    const review = await pending;
    const until = keepUntil(review, token, now());
    if (until > now()) {
      cache.set(key, { review, until });
      // A Map iterates in insertion order: the first key is the oldest entry.
      while (cache.size > max) cache.delete(cache.keys().next().value as string);
    }
    return review;
  }

  return {
    mode: opts.mode,
    audience: opts.audience,
    get reviews() {
      return reviews;
    },
    async check(reply, authorization) {
      const token = bearerToken(authorization);
      // Without a token only declared mode asks who the sender would be: to know whether one was due.
      const needsTrigger = token === undefined ? opts.mode === 'declared' : token !== 'malformed';
      const replyTrigger = needsTrigger ? await opts.replyTriggerOf?.(reply.hook) : undefined;
      const known = opts.hookExists?.(reply.hook) ?? true;
      const first = precheck(opts.mode, reply.hook, opts.identityOf(reply.hook), token, replyTrigger, known);
      if (!('check' in first)) return first;
      return judge(await reviewed(first.check), opts.audience, first.expected, reply.hook);
    },
  };
}

/** TokenReview through `kc` (the gate's client: its requests are counted in prestart_gate_kube_requests_total). */
export function kubeTokenReview(kc: KubeConfig): ReviewToken {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return async (token, audience) => {
    const answer = await api.createTokenReview({ body: { spec: { token, audiences: [audience] } } });
    const status = answer.status ?? {};
    if (status.authenticated !== true || !status.user?.username) {
      // The apiserver's own error text names only the cause (expired, wrong audience, bad signature).
      return { authenticated: false, reason: status.error ?? 'not authenticated' };
    }
    return { authenticated: true, username: status.user.username, ...(status.audiences ? { audiences: status.audiences } : {}) };
  };
}
