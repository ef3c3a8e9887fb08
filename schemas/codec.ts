// Reading CloudEvents off the HTTP protocol binding (binary and structured content modes), written
// out here rather than taken from the SDK, whose reader is lax where our contract is strict: it
// invents a missing id (structured) and a missing time, assumes specversion 1.0 when it is absent,
// builds the event unvalidated (no source, an empty type, specversion 0.3, a numeric id or an
// object extension all pass; a bad time is silently replaced by now), drops extension headers that
// are not lowercase, keeps the last of two differently spelled duplicate headers, neither decodes
// percent-encoded header values, turns a body that is not JSON into a string and silently drops
// `data` when `data_base64` is there too. Writing is the SDK's (encode.ts). The NATS transport
// reuses the same header names.

import { BATCH_CONTENT_TYPE, JSON_CONTENT_TYPE, SPEC_VERSION, STRUCTURED_CONTENT_TYPE } from './attributes.ts';
import type { CloudEventRecord } from './event.ts';
import { headerEntries } from './http-binding.ts';

export type ContractErrorCode =
  | 'malformed'
  | 'too-large'
  | 'unsupported-mode'
  | 'wrong-type'
  | 'invalid-data'
  | 'bad-replyid'
  | 'hook-mismatch';

/** Why an incoming event was refused; `status` is what an HTTP receiver answers (all permanent). */
export interface ContractError {
  code: ContractErrorCode;
  status: 400 | 403 | 413 | 415 | 422;
  /** One human line, safe to return to the sender and to log. */
  reason: string;
}

export type ContentMode = 'binary' | 'structured';

export type ParsedMessage = { ok: true; event: CloudEventRecord; mode: ContentMode } | { ok: false; error: ContractError };

/** What a receiver hands in: a Message, or an HTTP request's headers (node's may hold arrays). */
export interface ReceivedMessage {
  headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  body: Uint8Array | string;
}

export interface ParseOptions {
  /** Refuse bodies larger than this many bytes (headers are bounded by the HTTP server or NATS). */
  maxBytes: number;
}

const STATUS: Record<ContractErrorCode, ContractError['status']> = {
  malformed: 400,
  'too-large': 413,
  'unsupported-mode': 415,
  'wrong-type': 400,
  'invalid-data': 422,
  'bad-replyid': 403,
  'hook-mismatch': 422,
};

export function contractError(code: ContractErrorCode, reason: string, status = STATUS[code]): ContractError {
  return { code, status, reason };
}

const CE_PREFIX = 'ce-';
const ATTRIBUTE_NAME = /^[a-z0-9]{1,64}$/;
// Context attributes with a fixed place in each mode; everything else is an extension.
const CORE = new Set(['specversion', 'id', 'source', 'type', 'subject', 'time', 'datacontenttype', 'dataschema']);
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads one CloudEvent from a message in binary or structured mode. Checks what the binding
 * and the core attributes demand; it does not look at the type or the data's schema.
 */
export function parseMessage(message: ReceivedMessage, options: ParseOptions): ParsedMessage {
  const size = bodySize(message.body);
  if (size > options.maxBytes) {
    return fail('too-large', `body of ${size} bytes is larger than the limit of ${options.maxBytes} bytes`);
  }
  const headers = lowercaseHeaders(message.headers);
  if (!headers) return fail('malformed', 'the same header appears twice with different values');
  const contentType = headers.get('content-type');
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  if (mediaType === BATCH_CONTENT_TYPE) {
    return fail('unsupported-mode', 'batch mode is not supported: send one event per request');
  }
  if (mediaType === STRUCTURED_CONTENT_TYPE) return parseStructured(message.body);
  if (mediaType.startsWith('application/cloudevents')) {
    return fail('unsupported-mode', `structured mode with ${mediaType} is not supported: use ${STRUCTURED_CONTENT_TYPE}`);
  }
  if (headers.has('ce-specversion') || headers.has('ce-id') || headers.has('ce-type')) {
    return parseBinary(headers, contentType, message.body);
  }
  return fail(
    'malformed',
    `not a CloudEvent: no ce-specversion header and content-type ${contentType ? `"${contentType}"` : 'missing'} is not ${STRUCTURED_CONTENT_TYPE}`,
  );
}

function parseBinary(headers: Map<string, string>, contentType: string | undefined, body: Uint8Array | string): ParsedMessage {
  const event: Record<string, unknown> = {};
  for (const [header, raw] of headers) {
    if (!header.startsWith(CE_PREFIX)) continue;
    const name = header.slice(CE_PREFIX.length);
    // Intermediaries add headers that merely look like attributes; they are not ours to refuse.
    if (!ATTRIBUTE_NAME.test(name) || name === 'data' || name === 'datacontenttype') continue;
    event[name] = decodeHeaderValue(raw);
  }
  if (contentType !== undefined) event.datacontenttype = contentType;
  const problem = coreProblem(event);
  if (problem) return fail('malformed', problem);

  if (bodySize(body) > 0) {
    const data = binaryData(body, contentType);
    if (!data.ok) return fail('malformed', data.reason);
    event.data = data.data;
  }
  return { ok: true, event: event as CloudEventRecord, mode: 'binary' };
}

// JSON (also when no content type is given, the common case for careless senders), text as a
// string, anything else as bytes.
function binaryData(
  body: Uint8Array | string,
  contentType: string | undefined,
): { ok: true; data: unknown } | { ok: false; reason: string } {
  const json = contentType === undefined || isJson(contentType);
  if (!json && !contentType.toLowerCase().startsWith('text/')) {
    return { ok: true, data: typeof body === 'string' ? Buffer.from(body, 'utf8') : body };
  }
  const text = bodyText(body);
  if (text === undefined) return { ok: false, reason: 'body is not valid UTF-8' };
  if (!json) return { ok: true, data: text };
  try {
    return { ok: true, data: JSON.parse(text) };
  } catch {
    return { ok: false, reason: `body is not valid JSON (content-type ${contentType ?? 'missing, JSON assumed'})` };
  }
}

function parseStructured(body: Uint8Array | string): ParsedMessage {
  const text = bodyText(body);
  if (text === undefined) return fail('malformed', 'body is not valid UTF-8');
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    return fail('malformed', `body is not valid JSON (content-type ${STRUCTURED_CONTENT_TYPE})`);
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    return fail('malformed', 'structured body must be a JSON object');
  }
  const event: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(document)) {
    if (name === 'data' || name === 'data_base64') continue;
    if (!ATTRIBUTE_NAME.test(name)) continue;
    if (!CORE.has(name) && !isScalar(value)) {
      return fail('malformed', `extension attribute "${name}" must be a string, number or boolean`);
    }
    event[name] = value;
  }
  const problem = coreProblem(event);
  if (problem) return fail('malformed', problem);
  const fields = document as Record<string, unknown>;
  if (fields.data !== undefined && fields.data_base64 !== undefined) {
    return fail('malformed', 'structured body has both data and data_base64');
  }
  if (fields.data_base64 !== undefined) {
    if (typeof fields.data_base64 !== 'string') return fail('malformed', 'data_base64 must be a string');
    event.data = Buffer.from(fields.data_base64, 'base64');
  } else if (fields.data !== undefined) {
    event.data = fields.data;
  }
  return { ok: true, event: event as CloudEventRecord, mode: 'structured' };
}

// The SDK would fill a missing id with a UUID and a missing specversion with 1.0: check the raw values.
function coreProblem(event: Record<string, unknown>): string | undefined {
  const specversion = event.specversion;
  if (specversion === undefined) return 'missing required attribute specversion';
  if (specversion !== SPEC_VERSION) {
    return `unsupported specversion ${JSON.stringify(specversion)}: only ${SPEC_VERSION} is accepted`;
  }
  for (const name of ['id', 'source', 'type'] as const) {
    const value = event[name];
    if (value === undefined) return `missing required attribute ${name}`;
    if (typeof value !== 'string' || value.length === 0) return `attribute ${name} must be a non-empty string`;
  }
  for (const name of ['subject', 'datacontenttype', 'dataschema'] as const) {
    const value = event[name];
    if (value !== undefined && typeof value !== 'string') return `attribute ${name} must be a string`;
  }
  if (event.time !== undefined && (typeof event.time !== 'string' || !RFC3339.test(event.time))) {
    return `attribute time must be an RFC 3339 timestamp, got ${JSON.stringify(event.time)}`;
  }
  return undefined;
}

function fail(code: ContractErrorCode, reason: string): ParsedMessage {
  return { ok: false, error: contractError(code, reason) };
}

export function isJson(contentType: string): boolean {
  const media = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return media === JSON_CONTENT_TYPE || media === 'text/json' || media.endsWith('+json');
}

function isScalar(value: unknown): boolean {
  return typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
}

function decodeHeaderValue(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    // A sender that does not encode may still send a literal '%'.
    return value;
  }
}

function lowercaseHeaders(headers: ReceivedMessage['headers']): Map<string, string> | undefined {
  const out = new Map<string, string>();
  for (const [key, value] of headerEntries(headers)) {
    // Two spellings of one name saying different things: which one counts is anyone's guess.
    const seen = out.get(key);
    if (seen !== undefined && seen !== value) return undefined;
    out.set(key, value);
  }
  return out;
}

function bodyText(body: Uint8Array | string): string | undefined {
  if (typeof body === 'string') return body;
  try {
    return utf8.decode(body);
  } catch {
    return undefined;
  }
}

function bodySize(body: Uint8Array | string): number {
  return typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.byteLength;
}

/** The event's data as a JSON value, or why it is not one (binary data, non-JSON content type). */
export function jsonData(event: CloudEventRecord): { ok: true; data: unknown } | { ok: false; error: ContractError } {
  const contentType = event.datacontenttype;
  if (contentType !== undefined && !isJson(contentType)) {
    return { ok: false, error: contractError('invalid-data', `datacontenttype "${contentType}" is not ${JSON_CONTENT_TYPE}`) };
  }
  if (event.data instanceof Uint8Array) {
    return { ok: false, error: contractError('invalid-data', 'data must be JSON, not binary (data_base64)') };
  }
  // Some senders stringify the JSON twice; a string that parses is taken as what they meant.
  if (typeof event.data === 'string') {
    try {
      return { ok: true, data: JSON.parse(event.data) };
    } catch {
      return { ok: true, data: event.data };
    }
  }
  return { ok: true, data: event.data };
}

/** An Integer extension read from either mode: 2 in structured JSON, "2" in a header. */
export function integerAttribute(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'string' && /^-?\d{1,15}$/.test(value)) return Number(value);
  return undefined;
}
