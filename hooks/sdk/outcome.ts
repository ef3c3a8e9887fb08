// From what a handler returned (or threw) to a completed event that satisfies the schema. A
// handler bug must still end the attempt with a readable `failed`, never with silence or an
// HTTP error that a Broker would retry.
import { randomUUID } from 'node:crypto';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { buildCompleted, type RequestHandle } from '../../schemas/index.ts';
import type { Contribution } from './types.ts';

/** completed.data.schema.json: message is at most 4096 characters. */
export const MAX_MESSAGE = 4096;

/** The CloudEvents source of a hook that names none: a URI-reference, as the spec asks. */
export function defaultSource(name: string | undefined): string {
  return `/prestart-hooks/${name ?? 'hook'}`;
}

export function clip(message: string): string {
  return message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 1)}…` : message;
}

/** The final reply for whatever the handler produced; an outcome the schema refuses becomes `failed` saying why. */
export function finalEvent(request: RequestHandle, produced: unknown, source: string): CloudEventRecord {
  const id = randomUUID();
  const outcome = readOutcome(produced);
  if (outcome.ok) {
    try {
      return buildCompleted({ request, source, id, ...outcome.fields });
    } catch (err) {
      return failedEvent(
        request,
        source,
        id,
        `the hook returned an invalid outcome: ${(err as Error).message.replace(/^buildCompleted: /, '')}`,
      );
    }
  }
  return failedEvent(request, source, id, outcome.reason);
}

export function errorEvent(request: RequestHandle, error: unknown, source: string): CloudEventRecord {
  const text = error instanceof Error ? error.message : String(error);
  return failedEvent(request, source, randomUUID(), `the hook threw: ${text || 'an error without a message'}`);
}

export function progressEvent(
  request: RequestHandle,
  percent: number,
  message: string | undefined,
  source: string,
  details?: string,
): CloudEventRecord {
  const progress = Math.min(100, Math.max(0, Math.round(Number.isFinite(percent) ? percent : 0)));
  return buildCompleted({
    request,
    source,
    outcome: 'progress',
    progress,
    ...(message === undefined ? {} : { message: clip(message) }),
    ...(details === undefined ? {} : { details: clipDetails(details) }),
  });
}

/** completed.data.schema.json: details is one line of at most 1024 characters. */
export const MAX_DETAILS = 1024;

function clipDetails(details: string): string {
  // Control characters (newlines, escapes) are refused by the schema: one line, as in a terminal.
  const line = details.replace(/\p{Cc}+/gu, ' ').trim();
  return line.length > MAX_DETAILS ? `${line.slice(0, MAX_DETAILS - 1)}…` : line;
}

function failedEvent(request: RequestHandle, source: string, id: string, message: string): CloudEventRecord {
  return buildCompleted({ request, source, id, outcome: 'failed', message: clip(message) });
}

type Fields = {
  outcome: 'succeeded' | 'failed' | 'retry';
  message?: string;
  details?: string;
  retryAfter?: number;
  contributions?: Contribution[];
};

function readOutcome(produced: unknown): { ok: true; fields: Fields } | { ok: false; reason: string } {
  if (typeof produced !== 'object' || produced === null || typeof (produced as { succeeded?: unknown }).succeeded !== 'boolean') {
    return { ok: false, reason: `the hook returned ${describe(produced)} instead of {succeeded: true|false, ...}` };
  }
  const o = produced as { succeeded: boolean; message?: unknown; details?: unknown; contributions?: unknown; retryAfter?: unknown };
  if (o.message !== undefined && typeof o.message !== 'string')
    return { ok: false, reason: 'the hook returned a message that is not a string' };
  if (o.details !== undefined && typeof o.details !== 'string')
    return { ok: false, reason: 'the hook returned details that are not a string' };
  const details = o.details === undefined || o.details.trim() === '' ? {} : { details: clipDetails(o.details) };
  if (!o.succeeded && o.retryAfter !== undefined) {
    // Not ready yet: ask the gate to ask again. Whole seconds on the wire; a fraction rounds up.
    if (typeof o.retryAfter !== 'number' || !Number.isFinite(o.retryAfter) || o.retryAfter <= 0) {
      return { ok: false, reason: 'the hook returned a retryAfter that is not a positive number of seconds' };
    }
    const message = clip(o.message === undefined || o.message === '' ? 'not ready yet' : o.message);
    return { ok: true, fields: { outcome: 'retry', retryAfter: Math.ceil(o.retryAfter), message, ...details } };
  }
  if (!o.succeeded) return { ok: true, fields: { outcome: 'failed', message: clip(o.message ?? 'failed'), ...details } };
  const fields: Fields = { outcome: 'succeeded', ...details };
  if (o.message !== undefined) fields.message = clip(o.message);
  if (o.contributions !== undefined) {
    if (!Array.isArray(o.contributions)) return { ok: false, reason: 'the hook returned contributions that are not a list' };
    if (o.contributions.length > 0) fields.contributions = o.contributions as Contribution[];
  }
  return { ok: true, fields };
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  return typeof value === 'object' ? 'an object without a boolean "succeeded"' : `a ${typeof value}`;
}
