// Correlation ids: the gate signs where a request belongs, the hook echoes it as `replyid`,
// and the sink learns from the id alone which PrestartRun and hook a reply is for. Replies
// come through a Broker that hides the sender, so this signature is what stops anyone without
// the key from answering on a hook's behalf. The ref names the PrestartRun by its UID: a run
// deleted and created again starts at attempt 1 again, and only the UID tells its requests
// (and any reply captured from the old run) apart.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export interface CorrelationRef {
  namespace: string;
  /** Revision name. */
  revision: string;
  revisionUID: string;
  /**
   * metadata.uid of the PrestartRun: a new one each time the run is created. Absent in a v1 id,
   * which the gate mints and accepts only for a run an earlier release created (api/types.ts
   * RUN_IDS_ANNOTATION), so an upgrade keeps the requests in flight answerable.
   */
  runUID?: string;
  hook: string;
  attempt: number;
}

/** Keys shorter than this are refused: HMAC-SHA256 is only as strong as its key. */
export const MIN_KEY_BYTES = 32;
/** Longest id verify() looks at; mint() never produces a longer one. */
export const MAX_CORRELATION_ID_LENGTH = 1024;

// Domain separation: a MAC made for anything else with the same key never verifies here, and
// one format cannot be confused with another: a v2 id names its run, a v1 id (an earlier
// release's, still minted for that release's runs until they end) does not, and each verifies
// only under its own context.
const MAC_CONTEXT_V2 = 'prestart.dev/correlationid/v2:';
const MAC_CONTEXT_V1 = 'prestart.dev/correlationid/v1:';
const MAC_BYTES = 32;
const B64URL = /^[A-Za-z0-9_-]+$/;
const MAX_FIELD_LENGTH = 253;

export class KeyRing {
  #signingKey: Buffer;
  #keys: readonly Buffer[];

  /** The first key signs; every key verifies, so a new key can be put first while ids minted with the old one still verify. */
  constructor(keys: readonly Uint8Array[]) {
    const copies = checkedCopies(keys);
    this.#signingKey = copies[0] as Buffer;
    this.#keys = copies;
  }

  /**
   * Replaces the keys in place (the gate reloads its Secret): every holder of this ring signs and
   * verifies with the new keys from now on. Throws, leaving the ring as it was, on keys it would refuse.
   */
  replace(keys: readonly Uint8Array[]): void {
    const copies = checkedCopies(keys);
    this.#signingKey = copies[0] as Buffer;
    this.#keys = copies;
  }

  /** Keys as hex strings (the form used in the test vectors and in configuration). */
  static fromHex(...hexKeys: string[]): KeyRing {
    return new KeyRing(keysFromHex(hexKeys));
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
    const base = { namespace: ref.namespace, revision: ref.revision, revisionUID: ref.revisionUID };
    const tail = { hook: ref.hook, attempt: ref.attempt };
    const canonical = ref.runUID === undefined ? { ...base, ...tail } : { ...base, runUID: ref.runUID, ...tail };
    const payload = Buffer.from(JSON.stringify(canonical), 'utf8').toString('base64url');
    const context = ref.runUID === undefined ? MAC_CONTEXT_V1 : MAC_CONTEXT_V2;
    const id = `${payload}.${mac(this.#signingKey, context, payload).toString('base64url')}`;
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
    // The payload says which format it claims (a run UID or not); the MAC must then be of that
    // format's context, so a v1 MAC never passes for a v2 payload or the other way round.
    const ref = decodeRef(payload);
    if (ref === undefined) return undefined;
    const context = ref.runUID === undefined ? MAC_CONTEXT_V1 : MAC_CONTEXT_V2;
    // Try every key without stopping early, so timing does not tell which key matched.
    let genuine = false;
    for (const key of this.#keys) {
      if (timingSafeEqual(mac(key, context, payload), given)) genuine = true;
    }
    return genuine ? ref : undefined;
  }
}

/** Keys as hex strings (the form used in the test vectors and in the gate's Secret). */
export function keysFromHex(hexKeys: readonly string[]): Buffer[] {
  return hexKeys.map((hex, i) => {
    if (!/^(?:[0-9a-fA-F]{2})+$/.test(hex)) throw new Error(`KeyRing key ${i} is not hex`);
    return Buffer.from(hex, 'hex');
  });
}

function checkedCopies(keys: readonly Uint8Array[]): Buffer[] {
  const copies = keys.map((key, i) => {
    if (key.byteLength < MIN_KEY_BYTES) {
      throw new Error(`KeyRing key ${i} has ${key.byteLength} bytes; at least ${MIN_KEY_BYTES} are required`);
    }
    return Buffer.from(key);
  });
  if (copies.length === 0) throw new Error('KeyRing needs at least one key');
  return copies;
}

function mac(key: Buffer, context: string, payload: string): Buffer {
  return createHmac('sha256', key).update(context).update(payload).digest();
}

function decodeRef(payload: string): CorrelationRef | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { namespace, revision, revisionUID, runUID, hook, attempt } = parsed as Record<string, unknown>;
  const ref = (
    runUID === undefined ? { namespace, revision, revisionUID, hook, attempt } : { namespace, revision, revisionUID, runUID, hook, attempt }
  ) as CorrelationRef;
  return refProblem(ref) ? undefined : ref;
}

function refProblem(ref: CorrelationRef): string | undefined {
  const fields =
    ref.runUID === undefined
      ? (['namespace', 'revision', 'revisionUID', 'hook'] as const)
      : (['namespace', 'revision', 'revisionUID', 'runUID', 'hook'] as const);
  for (const field of fields) {
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
 * The CloudEvent id of a request: `<runUID>/<hook>/<attempt>`. Deterministic, so a resend of the
 * same request carries the same id and hooks can dedupe on source+id. It names the PrestartRun,
 * not the Revision: a run created again starts at attempt 1 again, and a hook that remembers the
 * old run's id must run again instead of answering from memory. A cancel gets the id of the start
 * it cancels plus `/cancel`.
 */
export function requestId(runUID: string, hook: string, attempt: number, action: RequestAction): string {
  const id = `${runUID}/${hook}/${attempt}`;
  return action === 'cancel' ? `${id}/cancel` : id;
}
