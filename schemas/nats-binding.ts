// The CloudEvents NATS protocol binding (spec 1.0.3: binary mode needs NATS >= 2.2 headers) and the
// JetStream plumbing that both the request emitter and the reply sink share.
//
// The schemas package speaks HTTP binary mode (`ce-*` headers plus `content-type` for
// datacontenttype). The NATS binding differs in one place: in binary mode datacontenttype travels
// as `ce-datacontenttype`, and a `Content-Type: application/cloudevents...` header marks
// structured mode. These helpers translate between the two so that each side keeps using the
// schemas' codecs unchanged.

import type { JetStreamManager, MsgHdrs, StreamConfig } from 'nats';
import { nanos, headers as natsHeaders, RetentionPolicy, StorageType } from 'nats';
import type { Message } from './event.ts';

export const REQUESTS_STREAM = 'PRESTART_REQUESTS';
export const REQUESTS_SUBJECT_PREFIX = 'prestart.requests';
export const REPLIES_STREAM = 'PRESTART_REPLIES';
export const REPLIES_SUBJECT_PREFIX = 'prestart.replies';

const STRUCTURED_PREFIX = 'application/cloudevents';

export function isStructuredContentType(contentType: string | undefined): boolean {
  return contentType?.trim().toLowerCase().startsWith(STRUCTURED_PREFIX) ?? false;
}

/** HTTP-style binary/structured message -> NATS headers following the NATS binding. */
export function toNatsHeaders(message: Message): MsgHdrs {
  const out = natsHeaders();
  const contentType = headerValue(message.headers, 'content-type');
  const structured = isStructuredContentType(contentType);
  for (const [name, value] of Object.entries(message.headers)) {
    const key = name.toLowerCase();
    if (key === 'content-type') continue;
    if (key.startsWith('ce-')) out.set(key, value);
  }
  if (contentType !== undefined) {
    out.set(structured ? 'content-type' : 'ce-datacontenttype', contentType);
  }
  return out;
}

/** NATS headers + payload -> the HTTP-style Message the schemas' parsers read. */
export function fromNatsMessage(headers: MsgHdrs | undefined, data: Uint8Array): Message {
  const flat: Record<string, string> = {};
  if (headers) {
    for (const key of headers.keys()) {
      // NATS allows repeated headers; CloudEvents attributes are single-valued, so the last wins
      // (as an HTTP proxy folding them would not make them valid either).
      flat[key.toLowerCase()] = headers.last(key);
    }
  }
  const contentType = flat['content-type'];
  if (!isStructuredContentType(contentType)) {
    const dataContentType = flat['ce-datacontenttype'];
    delete flat['ce-datacontenttype'];
    if (dataContentType !== undefined) flat['content-type'] = dataContentType;
  }
  return { headers: flat, body: data };
}

export function headerValue(headers: Record<string, string>, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}

/** A single-token check: NATS subject tokens may not be empty or contain wildcards/whitespace. */
export function isValidPublishSubject(subject: string): boolean {
  if (subject.length === 0 || subject.length > 1024) return false;
  return subject.split('.').every((token) => token.length > 0 && !/[\s*>]/.test(token));
}

export function subjectFor(prefix: string, hook: string): string {
  const subject = `${prefix}.${hook}`;
  if (!isValidPublishSubject(subject)) {
    throw new Error(`hook name ${JSON.stringify(hook)} does not make a valid NATS subject token`);
  }
  return subject;
}

export interface StreamSpec {
  name: string;
  subjects: string[];
  maxAgeMs: number;
  duplicateWindowMs: number;
}

/**
 * Creates the stream, or brings an existing one to the wanted subjects/limits. Safe to run from
 * several gate replicas at once: a concurrent create that loses the race is re-read and updated.
 */
export async function ensureStream(jsm: JetStreamManager, spec: StreamSpec): Promise<void> {
  const wanted: Partial<StreamConfig> = {
    subjects: spec.subjects,
    max_age: nanos(spec.maxAgeMs),
    duplicate_window: nanos(Math.min(spec.duplicateWindowMs, spec.maxAgeMs)),
  };
  for (let round = 0; round < 2; round++) {
    const existing = await jsm.streams.info(spec.name).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    if (existing === undefined) {
      try {
        await jsm.streams.add({
          name: spec.name,
          retention: RetentionPolicy.Limits,
          storage: StorageType.File,
          ...wanted,
        });
        return;
      } catch (err) {
        if (round === 0 && isAlreadyInUse(err)) continue;
        throw err;
      }
    }
    const cfg = existing.config;
    const same =
      containsAll(cfg.subjects ?? [], spec.subjects) && cfg.max_age === wanted.max_age && cfg.duplicate_window === wanted.duplicate_window;
    if (same) return;
    await jsm.streams.update(spec.name, {
      ...cfg,
      subjects: [...new Set([...(cfg.subjects ?? []), ...spec.subjects])],
      max_age: wanted.max_age,
      duplicate_window: wanted.duplicate_window,
    });
    return;
  }
}

function containsAll(have: string[], wanted: string[]): boolean {
  const set = new Set(have);
  return wanted.every((s) => set.has(s));
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: string; api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || e?.code === '404' || /not found/i.test(e?.message ?? '');
}

function isAlreadyInUse(err: unknown): boolean {
  const e = err as { api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10058 || /already in use/i.test(e?.message ?? '');
}

/** `nats-server` >= 2.11 reads a reason after +TERM; older servers may not recognise the longer token. */
export function serverSupportsTermReason(version: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(version ?? '');
  if (!m) return false;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > 2 || (major === 2 && minor >= 11);
}
