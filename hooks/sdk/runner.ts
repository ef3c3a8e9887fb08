// Runs the author's handler once per request, whatever the transport. Deliveries are at least
// once and the gate re-sends unanswered requests, so: a repeat of a running request joins it, a
// repeat of a finished one gets the same final event back (same id: the gate sees a duplicate),
// and a cancel aborts the run or, when it overtook its start, keeps that start from running.
import type { Logger } from 'pino';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { type ContractError, type ParsedRequest, parseRequested, type ReceivedMessage } from '../../schemas/index.ts';
import { BoundedMap } from './lru.ts';
import { errorEvent, finalEvent, progressEvent } from './outcome.ts';
import { attemptKey, toHookRequest } from './request.ts';
import { startHandlerSpan } from './trace.ts';
import { CancelledError, DeadlineError, type HookContext, type HookHandler } from './types.ts';

/** Sends one progress report; rejecting only costs that report. */
export type ProgressSender = (event: CloudEventRecord) => Promise<void>;

export interface Job {
  /** source#id of the request. */
  key: string;
  /** The final completed event, or undefined when the run ended without one (cancelled, deadline passed, shutdown). */
  done: Promise<CloudEventRecord | undefined>;
}

export type Submission =
  | { type: 'started' | 'joined'; job: Job }
  | { type: 'finished'; final: CloudEventRecord }
  | { type: 'skipped'; reason: string };

export interface HookRunner {
  /** `sendProgress` is used when this submission starts the run. */
  submit(request: ParsedRequest, sendProgress?: ProgressSender): Submission;
  /** Aborts the run of the attempt a cancel names, or remembers the cancel for a start still to come. */
  cancel(request: ParsedRequest): 'aborted' | 'remembered';
  readonly running: number;
  /** Aborts every run and waits for the handlers to return; later submissions are skipped. */
  close(): Promise<void>;
}

export interface HookRunnerOptions {
  handler: HookHandler;
  /** The hook's CloudEvents source. */
  source: string;
  logger: Logger;
  /** Finished results and cancels remembered. Default 1000 each. */
  remember?: number;
}

interface Running extends Job {
  controller: AbortController;
}

// setTimeout takes at most a signed 32-bit delay; a longer one fires at once.
const MAX_TIMER_MS = 2 ** 31 - 1;

export function createHookRunner(opts: HookRunnerOptions): HookRunner {
  const remember = opts.remember ?? 1000;
  const running = new Map<string, Running>();
  const runningByAttempt = new Map<string, string>();
  const finished = new BoundedMap<string, CloudEventRecord>(remember);
  const cancelled = new BoundedMap<string, string>(remember);
  let closed = false;

  function start(parsed: ParsedRequest, sendProgress: ProgressSender | undefined): Running | string {
    const request = toHookRequest(parsed);
    const left = request.deadline.getTime() - Date.now();
    if (!(left > 0)) return `its deadline ${parsed.data.deadline ?? '(none)'} has passed`;
    const key = parsed.key;
    const attempt = attemptKey(parsed);
    const log = opts.logger.child({
      hook: request.hook,
      revision: `${request.revision.namespace}/${request.revision.name}`,
      attempt: request.attempt,
    });
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DeadlineError(`the deadline ${parsed.data.deadline} passed`)),
      Math.min(left, MAX_TIMER_MS),
    );
    let open = true;
    let reports: Promise<void> = Promise.resolve();
    const ctx: HookContext = {
      signal: controller.signal,
      logger: log,
      progress(percent, message, details) {
        if (!open || !sendProgress) return Promise.resolve();
        let event: CloudEventRecord;
        try {
          event = progressEvent(parsed, percent, message, opts.source, details);
        } catch (err) {
          log.warn({ err }, 'progress report not sent');
          return Promise.resolve();
        }
        // One after the other, so reports arrive in the order they were made and before the final one.
        reports = reports.then(() => sendProgress(event)).catch((err: unknown) => log.warn({ err }, 'progress report not delivered'));
        return reports;
      },
    };
    const done = (async (): Promise<CloudEventRecord | undefined> => {
      // Let the transport answer the delivery before the handler's synchronous part runs.
      await new Promise((resolve) => setImmediate(resolve));
      let produced: unknown;
      let error: { thrown: unknown } | undefined;
      const span = startHandlerSpan(request);
      try {
        produced = await span.run(() => opts.handler(request, ctx));
      } catch (thrown) {
        error = { thrown };
      }
      span.end(error ?? { succeeded: (produced as { succeeded?: unknown } | undefined)?.succeeded === true });
      open = false;
      clearTimeout(timer);
      await reports;
      running.delete(key);
      runningByAttempt.delete(attempt);
      if (controller.signal.aborted) {
        // The gate has stopped listening (cancel, deadline), or another replica will get the resend.
        log.info({ reason: String((controller.signal.reason as Error)?.message ?? controller.signal.reason) }, 'run ended without a reply');
        return undefined;
      }
      const final = span.stamp(error ? errorEvent(parsed, error.thrown, opts.source) : finalEvent(parsed, produced, opts.source));
      if (error) log.warn({ err: error.thrown }, 'handler threw; replying failed');
      finished.set(key, final);
      return final;
    })();
    const job: Running = { key, done, controller };
    running.set(key, job);
    runningByAttempt.set(attempt, key);
    log.info({ event: key }, 'run started');
    return job;
  }

  return {
    submit(parsed, sendProgress) {
      if (closed) return { type: 'skipped', reason: 'the hook is shutting down' };
      const final = finished.get(parsed.key);
      if (final) return { type: 'finished', final };
      const job = running.get(parsed.key);
      if (job) return { type: 'joined', job };
      const why = cancelled.get(attemptKey(parsed));
      if (why !== undefined) return { type: 'skipped', reason: `it was cancelled before it started (${why})` };
      const started = start(parsed, sendProgress);
      return typeof started === 'string' ? { type: 'skipped', reason: started } : { type: 'started', job: started };
    },
    cancel(parsed) {
      const attempt = attemptKey(parsed);
      const reason = parsed.data.reason ?? 'cancelled';
      cancelled.set(attempt, reason);
      const key = runningByAttempt.get(attempt);
      const job = key === undefined ? undefined : running.get(key);
      if (!job) return 'remembered';
      job.controller.abort(new CancelledError(reason));
      return 'aborted';
    },
    get running() {
      return running.size;
    },
    async close() {
      closed = true;
      const jobs = [...running.values()];
      for (const job of jobs) job.controller.abort(new Error('the hook is shutting down'));
      await Promise.allSettled(jobs.map((j) => j.done));
    },
  };
}

/** What became of one delivery, for the transport to answer it (HTTP status, ack/nak/term). */
export type Dispatched =
  /** Not a valid request: no retry will change that. */
  | { type: 'refused'; error: ContractError }
  /** A request for another hook, or a cancel: taken, nothing (more) to do. */
  | { type: 'taken' }
  | { type: 'submitted'; request: ParsedRequest; submission: Submission };

export interface DispatchOptions {
  /** The PrestartHook served; requests for others are taken and left alone. Any when absent. */
  serves?: string;
  logger: Logger;
  /** Added to the log lines (the delivery's ce-id, a stream sequence). */
  fields?: Record<string, unknown>;
  /** Where the run's progress reports go, when this delivery starts it. */
  progressFor?: (request: ParsedRequest) => ProgressSender | undefined;
}

/** The same steps for every transport: parse, keep to the hook served, cancel, or submit. */
export function dispatchRequest(runner: HookRunner, message: ReceivedMessage, opts: DispatchOptions): Dispatched {
  const log = opts.logger;
  const parsed = parseRequested(message);
  if (!parsed.ok) {
    log.warn({ ...opts.fields, code: parsed.error.code, reason: parsed.error.reason }, 'request refused');
    return { type: 'refused', error: parsed.error };
  }
  const request = parsed.request;
  if (opts.serves !== undefined && request.hook !== opts.serves) {
    log.info(
      { event: request.key, hook: request.hook },
      `request for hook "${request.hook}" ignored: this service serves "${opts.serves}"`,
    );
    return { type: 'taken' };
  }
  if (request.data.action === 'cancel') {
    log.info({ event: request.key, reason: request.data.reason, result: runner.cancel(request) }, 'cancel');
    return { type: 'taken' };
  }
  const submission = runner.submit(request, opts.progressFor?.(request));
  if (submission.type === 'skipped') log.info({ event: request.key, reason: submission.reason }, 'request not run');
  return { type: 'submitted', request, submission };
}
