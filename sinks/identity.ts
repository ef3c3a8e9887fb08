// Sender identity on the reply path, the pure part: what a reply's Authorization header is, what a
// TokenReview's answer means for the hook the reply names, and how long an answer may be kept.
// The HMAC replyid says which request a reply is for; this says who sent it. A valid replyid can
// be read by anyone who sees the request (a Trigger on the Broker: review R4), a token of the
// hook's ServiceAccount cannot. The shell (sinks/token-review.ts) calls the apiserver.
import type { HookIdentity } from '../api/types.ts';

/**
 * off: the header is not looked at (HMAC replyid only, as before).
 * optional: a token, when a reply carries one, must be valid and the hook's; none is still taken.
 * declared: a reply for a hook whose sender is known (its identity.serviceAccount, or its Broker's
 *   reply Trigger with an OIDC identity) needs that sender's token; a hook that declares none is
 *   taken on its replyid. The release's mode: identity wherever the cluster and the hook give one,
 *   and no hook that predates identity stops working.
 * required: every reply to the HTTP sink needs a valid token of the hook's ServiceAccount.
 */
export type IdentityMode = 'off' | 'optional' | 'declared' | 'required';
export const IDENTITY_MODES: readonly IdentityMode[] = ['off', 'optional', 'declared', 'required'];

/** The audience hooks mint their reply tokens for, unless the gate is given another (--reply-audience). */
export const DEFAULT_SINK_AUDIENCE = 'knative-prestart-gate';
/** Every sink answer names the audience it checks tokens for (docs/protocol.md "Sender identity"). */
export const AUDIENCE_HEADER = 'prestart-audience';

/** What the apiserver said of a token (TokenReview status), reduced to what the sink needs. */
export type Review = { authenticated: true; username: string; audiences?: string[] } | { authenticated: false; reason: string };

export type Verdict = { ok: true } | { ok: false; status: 401 | 403; reason: string };

export const serviceAccountUser = (sa: { namespace: string; name: string }): string => `system:serviceaccount:${sa.namespace}:${sa.name}`;

/**
 * The gate's reply Trigger on a Broker hook's Broker (triggers/desired.ts) and the OIDC
 * ServiceAccount Knative Eventing gave it (Trigger status.auth.serviceAccountName; absent until
 * Eventing, with `authentication-oidc` enabled, has set it). Eventing's broker filter delivers a
 * reply to the gate's sink with a token of that ServiceAccount for the Trigger's
 * spec.subscriber.audience: such a token says "this came out of the Broker through the gate's
 * own Trigger", and the Broker's EventPolicy (examples/eventpolicy.yaml) says who may put it in.
 */
export interface ReplyTriggerIdentity {
  namespace: string;
  name: string;
  serviceAccount?: string;
}

/** One identity a reply may come from, and by which road (for the reasons given to a refused sender). */
export interface Sender {
  username: string;
  road: string;
}

/** The bearer token in an Authorization header; `malformed` for a header that is there but is not one. */
export function bearerToken(header: string | string[] | undefined): string | undefined | 'malformed' {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) return 'malformed';
  const m = /^Bearer[ ]+([A-Za-z0-9._~+/=-]+)[ ]*$/i.exec(header);
  return m?.[1] ?? 'malformed';
}

/**
 * Who may send a reply for a hook: its own ServiceAccount (direct replies to the sink), and for a
 * Broker hook the OIDC ServiceAccount of the gate's reply Trigger on its Broker (replies the
 * Broker delivers). Nobody else: not the hook's request Trigger, not another Broker's reply Trigger.
 */
export function allowedSenders(identity: HookIdentity | undefined, replyTrigger: ReplyTriggerIdentity | undefined): Sender[] {
  const out: Sender[] = [];
  if (identity?.serviceAccount) out.push({ username: serviceAccountUser(identity.serviceAccount), road: 'directly' });
  if (replyTrigger?.serviceAccount) {
    out.push({
      username: serviceAccountUser({ namespace: replyTrigger.namespace, name: replyTrigger.serviceAccount }),
      road: `through the Broker's reply Trigger ${replyTrigger.namespace}/${replyTrigger.name}`,
    });
  }
  return out;
}

/**
 * What to do before any TokenReview: `check` means review the token; otherwise the verdict. A hook
 * no identity can be tied to (no identity.serviceAccount, and no reply Trigger identity) is refused
 * in required mode (fail closed), taken on its replyid alone in optional and declared mode.
 */
export function precheck(
  mode: Exclude<IdentityMode, 'off'>,
  hook: string,
  identity: HookIdentity | undefined,
  token: string | undefined | 'malformed',
  replyTrigger?: ReplyTriggerIdentity,
  /** False when no PrestartHook of that name exists now (deleted while a run still waits on it). */
  known = true,
): Verdict | { check: string; expected: Sender[] } {
  if (token === 'malformed') return { ok: false, status: 401, reason: 'the Authorization header is not "Bearer <token>"' };
  // Declared mode trusts a reply on its replyid alone only for a hook that names no sender; a
  // deleted hook no longer says whether it did, so nothing can be trusted for it.
  if (!known && mode === 'declared') {
    return {
      ok: false,
      status: 403,
      reason: `no PrestartHook ${hook} exists now, so whom its replies come from cannot be checked: re-create it to answer, or delete the PrestartRun to start over`,
    };
  }
  const expected = allowedSenders(identity, replyTrigger);
  if (token === undefined) {
    if (mode === 'optional' || (mode === 'declared' && expected.length === 0)) return { ok: true };
    const who = mode === 'declared' ? ` (it replies as ${expected.map((s) => `${s.username} ${s.road}`).join(' or ')})` : '';
    return {
      ok: false,
      status: 401,
      reason: `a reply for hook ${hook} needs a bearer token${who} (the gate runs with --reply-identity ${mode})`,
    };
  }
  if (expected.length === 0) {
    if (mode !== 'required') return { ok: true };
    const noTrigger = replyTrigger
      ? `; its Broker's reply Trigger ${replyTrigger.namespace}/${replyTrigger.name} has no OIDC identity yet (status.auth.serviceAccountName: is authentication-oidc enabled in Knative Eventing?)`
      : '';
    return { ok: false, status: 403, reason: `hook ${hook} names no identity.serviceAccount${noTrigger}: no reply for it can be trusted` };
  }
  return { check: token, expected };
}

/** The verdict once the apiserver has reviewed the token for `audience`. */
export function judge(review: Review, audience: string, expected: readonly Sender[], hook: string): Verdict {
  if (!review.authenticated)
    return { ok: false, status: 401, reason: `the bearer token is not valid for audience ${audience}: ${review.reason}` };
  // The apiserver only authenticates a token for the audiences asked; an answer naming others is not ours.
  if (review.audiences !== undefined && !review.audiences.includes(audience)) {
    return { ok: false, status: 401, reason: `the bearer token is not valid for audience ${audience}` };
  }
  if (!expected.some((s) => s.username === review.username)) {
    const who = expected.map((s) => `${s.username} (${s.road})`).join(' or ');
    return { ok: false, status: 403, reason: `the token is ${review.username}'s; hook ${hook} replies as ${who}` };
  }
  return { ok: true };
}

/**
 * The `exp` claim of a JWT, in ms, or undefined. Read only to know how long a review may be kept:
 * nothing else in the payload is trusted, the signature is the apiserver's to check.
 */
export function jwtExpiryMs(token: string): number | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === undefined || parts[1].length > 8192) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' && Number.isFinite(claims.exp) ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Kept at most this long when the token says nothing of its end (a legacy Secret token has no exp). */
export const MAX_CACHE_MS = 60 * 60 * 1000;
/** A refusal is remembered this long: a stranger repeating a bad token costs one review per window. */
export const REFUSAL_CACHE_MS = 30 * 1000;

/** Until when a review of `token` taken at `now` may be reused: a valid one until the token expires (never past MAX_CACHE_MS), a refusal briefly. */
export function keepUntil(review: Review, token: string, now: number): number {
  if (!review.authenticated) return now + REFUSAL_CACHE_MS;
  const exp = jwtExpiryMs(token);
  return Math.min(exp ?? now + MAX_CACHE_MS, now + MAX_CACHE_MS);
}
