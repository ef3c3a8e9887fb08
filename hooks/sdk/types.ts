// What a hook author works with: one typed request in, one outcome out. Everything about
// CloudEvents, transports, dedupe and retries stays inside the SDK.
import type { Logger } from 'pino';
import type { Contribution, ContributionKind } from '../../api/types.ts';
import type { RequestedVersion } from '../../schemas/attributes.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import type { RequestedContainer, RequestedRevision } from '../../schemas/validate.ts';

export type { Contribution, ContributionKind };

/**
 * The Revision a request is about, as the gate saw it when it held the Revision (the contract's
 * type). `containers` names what will run, with Knative's digests: use it (or imagesToRun) to
 * decide what to scan or run; it is absent in a request from a version 1 gate.
 */
export type HookRevision = RequestedRevision;
/** One of `revision.containers`: scan or run `digest` when set, `image` otherwise. */
export type HookContainer = RequestedContainer;

export interface HookRequest {
  /** The PrestartHook this request is for. */
  hook: string;
  /** The protocol version of the request: 1 from a gate that predates `revision.containers`, 2 otherwise. */
  version: RequestedVersion;
  revision: HookRevision;
  /** `spec.params` of the PrestartHook when the run started (never secrets: anyone who can read requests sees them). */
  params: Record<string, unknown>;
  /** 1 for the first run; grows when an admin retries and when the gate asks again after a `retryAfter` outcome. */
  attempt: number;
  /** The gate stops waiting then; `ctx.signal` aborts at that moment. */
  deadline: Date;
  /** Contribution kinds the gate keeps; others are dropped with a note. */
  allowedContributions: ContributionKind[];
  /** The CloudEvent as received (source, id, traceparent, extensions). */
  event: CloudEventRecord;
}

export interface HookContext {
  /** Aborts when the gate cancels the request (reason: CancelledError) or the deadline passes (reason: DeadlineError). */
  signal: AbortSignal;
  /** Sends a non-final progress report (percent 0..100). Never rejects: a lost report only costs a status update. */
  progress(percent: number, message?: string, details?: string): Promise<void>;
  logger: Logger;
}

/**
 * `details`: where a person finds more, a URL (logs, a ticket, a dashboard) or a command (one line,
 * at most 1024 characters); shown by `kn prestart get/why`, in the PrestartRun and in Events.
 */
export type HookOutcome =
  | { succeeded: true; message?: string; details?: string; contributions?: Contribution[] }
  | { succeeded: false; message: string; details?: string; retryAfter?: number };

export type HookHandler = (request: HookRequest, ctx: HookContext) => Promise<HookOutcome>;

export function succeed(message?: string, contributions?: Contribution[]): HookOutcome {
  const outcome: HookOutcome = { succeeded: true };
  if (message !== undefined) outcome.message = message;
  if (contributions !== undefined && contributions.length > 0) outcome.contributions = contributions;
  return outcome;
}

export function fail(message: string, details?: string): HookOutcome {
  return details === undefined ? { succeeded: false, message } : { succeeded: false, message, details };
}

/**
 * Not ready yet (a quota not free, a dependency not ready): the attempt ends with outcome `retry`
 * and the gate asks again in `seconds` (whole seconds, 1 to 86400; its PrestartHook may cut it to
 * spec.retryAfter.maxDelay) as the next attempt, with the same deadline. `reason` shows in
 * `kn prestart` and the Revision's hold message.
 */
export function retryAfter(seconds: number, reason: string, details?: string): HookOutcome {
  const outcome: HookOutcome = { succeeded: false, message: reason, retryAfter: seconds };
  if (details !== undefined) outcome.details = details;
  return outcome;
}

/** The reason of `ctx.signal` when the gate sent a cancel. */
export class CancelledError extends Error {
  override readonly name = 'CancelledError';
}

/** The reason of `ctx.signal` when the request's deadline passed. */
export class DeadlineError extends Error {
  override readonly name = 'DeadlineError';
}
