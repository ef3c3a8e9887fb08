// The CloudEvents NATS protocol binding (spec 1.0.3: binary mode needs NATS >= 2.2 headers).
// Stream names, limits and set-up are in nats.ts.
//
// The schemas package speaks HTTP binary mode (`ce-*` headers plus `content-type` for
// datacontenttype). The NATS binding differs in one place: in binary mode datacontenttype travels
// as `ce-datacontenttype`, and a `Content-Type: application/cloudevents...` header marks
// structured mode. These helpers translate between the two so that each side keeps using the
// schemas' codecs unchanged.

import type { MsgHdrs } from 'nats';
import { headers as natsHeaders } from 'nats';
import type { Message } from './event.ts';
import { flattenHeaders, isStructuredContentType } from './http-binding.ts';

/** HTTP-style binary/structured message -> NATS headers following the NATS binding. */
export function toNatsHeaders(message: Message): MsgHdrs {
  const out = natsHeaders();
  const flat = flattenHeaders(message.headers);
  const contentType = flat['content-type'];
  const structured = isStructuredContentType(contentType);
  for (const [key, value] of Object.entries(flat)) {
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

/** `nats-server` >= 2.11 reads a reason after +TERM; older servers may not recognise the longer token. */
export function serverSupportsTermReason(version: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(version ?? '');
  if (!m) return false;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > 2 || (major === 2 && minor >= 11);
}
