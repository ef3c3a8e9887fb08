// Outgoing events are built and laid out by the CloudEvents SDK: `new CloudEvent(...)` checks the
// event against the spec (strict mode: required attributes, attribute names, time and source
// formats) and `HTTP.binary` / `HTTP.structured` put it on the wire. The gate's requests (every
// emitter transport) and the hook SDK's replies (HTTP POST, 200 answer, NATS publish) all go
// through here. Two things the SDK's writer leaves undone are finished here: header values are
// percent-encoded as the HTTP binding demands (3.1.3.2; the SDK passes them raw, so a non-ASCII
// subject would not even be a legal header) and Integer extensions become strings. Incoming
// messages are read by our own strict codec (codec.ts), because the SDK's reader is lax.

import { CloudEvent, HTTP } from 'cloudevents';
import type { CloudEventRecord, Message } from './event.ts';

/** Binary content mode: attributes in ce-* headers (percent-encoded), data as the body. */
export function toBinary(event: CloudEventRecord): Message {
  const message = HTTP.binary(asSdkEvent(event));
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers)) {
    if (value === undefined) continue;
    headers[name] = name.startsWith('ce-') ? encodeHeaderValue(attributeString(name, value)) : String(value);
  }
  return { headers, body: bodyOf(message.body) };
}

/** Structured content mode: the whole event as one application/cloudevents+json document. */
export function toStructured(event: CloudEventRecord): Message {
  const message = HTTP.structured(asSdkEvent(event));
  return { headers: { 'content-type': String(message.headers['content-type']) }, body: bodyOf(message.body) };
}

function asSdkEvent(event: CloudEventRecord): CloudEvent<unknown> {
  return event instanceof CloudEvent ? event : new CloudEvent<unknown>(event);
}

function bodyOf(body: unknown): string | Uint8Array {
  if (body === undefined) return '';
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  // Scalars as JSON data (the SDK only stringifies objects).
  return JSON.stringify(body);
}

// The SDK accepts any object as an extension value; a header can only carry a scalar.
function attributeString(name: string, value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new TypeError(`attribute ${name.slice(3)} cannot be sent as a header: ${typeof value}`);
}

// HTTP binding 3.1.3.2: space, '"', '%' and everything outside printable ASCII is
// percent-encoded as UTF-8.
function encodeHeaderValue(value: string): string {
  let out = '';
  for (const char of value) {
    const code = char.codePointAt(0) ?? 0;
    if (code >= 0x21 && code <= 0x7e && char !== '"' && char !== '%') out += char;
    else for (const byte of Buffer.from(char, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
