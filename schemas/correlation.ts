// Correlation ids: the gate signs where a request belongs, the hook echoes it as `replyid`,
// and the sink learns from the id alone which PrestartRun and hook a reply is for. Replies
// come through a Broker that hides the sender, so this signature is what stops anyone without
// the key from answering on a hook's behalf.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export interface CorrelationRef {
  namespace: string;
  /** Revision name. */
  revision: string;
  revisionUID: string;
  hook: string;
  attempt: number;
}

/** Keys shorter than this are refused: HMAC-SHA256 is only as strong as its key. */
export const MIN_KEY_BYTES = 32;
/** Longest id verify() looks at; mint() never produces a longer one. */
export const MAX_CORRELATION_ID_LENGTH = 1024;

// Domain separation: a MAC made for anything else with the same key never verifies here, and
// a future format (v2) cannot be confused with this one.
const MAC_CONTEXT = 'prestart.dev/correlationid/v1:';
const MAC_BYTES = 32;
const B64URL = /^[A-Za-z0-9_-]+$/;
const MAX_FIELD_LENGTH = 253;

export class KeyRing {
  readonly #signingKey: Buffer;
  readonly #keys: readonly Buffer[];

  /** The first key signs; every key verifies, so a new key can be put first while ids minted with the old one still verify. */
  constructor(keys: readonly Uint8Array[]) {
    const copies = keys.map((key, i) => {
      if (key.byteLength < MIN_KEY_BYTES) {
        throw new Error(`KeyRing key ${i} has ${key.byteLength} bytes; at least ${MIN_KEY_BYTES} are required`);
      }
      return Buffer.from(key);
    });
    const [signingKey] = copies;
    if (!signingKey) throw new Error('KeyRing needs at least one key');
    this.#signingKey = signingKey;
    this.#keys = copies;
  }

  /** Keys as hex strings (the form used in the test vectors and in configuration). */
  static fromHex(...hexKeys: string[]): KeyRing {
    return new KeyRing(
      hexKeys.map((hex, i) => {
        if (!/^(?:[0-9a-fA-F]{2})+$/.test(hex)) throw new Error(`KeyRing key ${i} is not hex`);
        return Buffer.from(hex, 'hex');
      }),
    );
  }

  /** A fresh random signing key. */
  static generateKey(): Uint8Array {
    return randomBytes(MIN_KEY_BYTES);
  }

  get size(): number {
    return this.#keys.length;
  }

  /** `<base64url(JSON ref)>.<base64url(HMAC-SHA256(key, context + payload))>`. Throws on an invalid ref. */
  mint(ref: CorrelationRef): string {
    const problem = refProblem(ref);
    if (problem) throw new Error(`cannot mint a correlation id: ${problem}`);
    const canonical = {
      namespace: ref.namespace,
      revision: ref.revision,
      revisionUID: ref.revisionUID,
      hook: ref.hook,
      attempt: ref.attempt,
    };
    const payload = Buffer.from(JSON.stringify(canonical), 'utf8').toString('base64url');
    const id = `${payload}.${mac(this.#signingKey, payload).toString('base64url')}`;
    if (id.length > MAX_CORRELATION_ID_LENGTH) throw new Error('cannot mint a correlation id: ref is too long');
    return id;
  }

  /** The ref inside a genuine id, or undefined for anything else (forged, tampered, truncated, not a string). */
  verify(id: unknown): CorrelationRef | undefined {
    if (typeof id !== 'string' || id.length > MAX_CORRELATION_ID_LENGTH) return undefined;
    const dot = id.indexOf('.');
    if (dot <= 0 || dot !== id.lastIndexOf('.')) return undefined;
    const payload = id.slice(0, dot);
    const signature = id.slice(dot + 1);
    if (!B64URL.test(payload) || !B64URL.test(signature)) return undefined;
    const given = Buffer.from(signature, 'base64url');
    // Non-canonical base64url (different unused low bits) would let one MAC have many spellings.
    if (given.length !== MAC_BYTES || given.toString('base64url') !== signature) return undefined;
    // Try every key without stopping early, so timing does not tell which key matched.
    let genuine = false;
    for (const key of this.#keys) {
      if (timingSafeEqual(mac(key, payload), given)) genuine = true;
    }
    if (!genuine) return undefined;
    return decodeRef(payload);
  }
}

function mac(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(MAC_CONTEXT).update(payload).digest();
}

function decodeRef(payload: string): CorrelationRef | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { namespace, revision, revisionUID, hook, attempt } = parsed as Record<string, unknown>;
  const ref = { namespace, revision, revisionUID, hook, attempt } as CorrelationRef;
  return refProblem(ref) ? undefined : ref;
}

function refProblem(ref: CorrelationRef): string | undefined {
  for (const field of ['namespace', 'revision', 'revisionUID', 'hook'] as const) {
    const value: unknown = ref[field];
    if (typeof value !== 'string' || value.length === 0 || value.length > MAX_FIELD_LENGTH) {
      return `${field} must be a non-empty string of at most ${MAX_FIELD_LENGTH} characters`;
    }
  }
  if (!Number.isSafeInteger(ref.attempt) || ref.attempt < 1) return 'attempt must be an integer >= 1';
  return undefined;
}

export type RequestAction = 'start' | 'cancel';

/**
 * The CloudEvent id of a request. Deterministic, so a resend of the same request carries the
 * same id and hooks can dedupe on source+id; a cancel gets its own id.
 */
export function requestId(revisionUID: string, hook: string, attempt: number, action: RequestAction): string {
  const id = `${revisionUID}/${hook}/${attempt}`;
  return action === 'cancel' ? `${id}/cancel` : id;
}
