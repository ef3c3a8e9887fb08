// R11: a hook that is not ready yet may answer `retry` (ask me again in N seconds). Given the
// params that make it do so (--retry-param), the checker plays the gate: it waits the delay the
// hook asked for (cut to the checker's timeout), asks again as the next attempt (a new id and
// correlationid, the same deadline), and goes on until a final succeeded or failed, at most as
// many times as a PrestartHook allows by default. checkRetry judges what came back; it is pure.
import { setTimeout as sleep } from 'node:timers/promises';
import { jsonData } from '../../schemas/codec.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { replyLine, seconds } from './describe.ts';
import type { Answer } from './post.ts';
import type { ReceivedReply } from './reply-sink.ts';
import type { Check } from './rules.ts';

/** As many retries as a PrestartHook allows by default (gate/core/retry-after.ts DEFAULT_RETRY_MAX_RETRIES). */
export const MAX_CHECKED_RETRIES = 10;
export const RETRY_PROBE = 'retry';

const RULE = 'R11-retry-well-formed-and-honoured';

export interface RetryRound {
  attempt: number;
  answer: Answer;
  /** The reply that ended the wait: final, or one the gate refuses; undefined when none came in time. */
  final?: ReceivedReply;
  /** How long the checker waited before asking again, and whether it cut the hook's delay. */
  waitedMs?: number;
  cut?: boolean;
}

export interface RetryPlay {
  rounds: RetryRound[];
  /** Every reply to the retry probe, in the order they came. */
  replies: readonly ReceivedReply[];
}

export interface RetryDriver {
  send(request: CloudEventRecord, what: string): Promise<Answer>;
  /** The reply that ends this attempt's wait (final, or refused), among those not in `earlier`. */
  finalFor(answer: Answer, earlier: ReadonlySet<ReceivedReply>): Promise<ReceivedReply | undefined>;
  replies(): readonly ReceivedReply[];
  nextAttempt(attempt: number): CloudEventRecord;
}

export async function playRetries(first: CloudEventRecord, d: RetryDriver, timeoutMs: number): Promise<RetryPlay> {
  const rounds: RetryRound[] = [];
  let request = first;
  for (let attempt = 1; attempt <= MAX_CHECKED_RETRIES + 1; attempt++) {
    const earlier = new Set(d.replies());
    const answer = await d.send(request, `the retry probe, attempt ${attempt}`);
    const final = await d.finalFor(answer, earlier);
    const round: RetryRound = final ? { attempt, answer, final } : { attempt, answer };
    rounds.push(round);
    const delay = final?.reply?.outcome === 'retry' ? final.reply.retryAfter : undefined;
    if (delay === undefined || attempt > MAX_CHECKED_RETRIES) break;
    round.waitedMs = Math.min(delay * 1000, timeoutMs);
    round.cut = round.waitedMs < delay * 1000;
    await sleep(round.waitedMs);
    request = d.nextAttempt(attempt + 1);
  }
  return { rounds, replies: d.replies() };
}

export function checkRetry(play: RetryPlay, params: Record<string, unknown>, waitedMs: number): Check {
  const fail = (detail: string): Check => ({ rule: RULE, passed: false, detail });
  const given = `with params ${JSON.stringify(params)}`;
  const refused = play.replies.find((r) => r.error);
  if (refused?.error) {
    return fail(
      `the retry probe (${given}) got a reply the gate refuses: ${refused.error.code}: ${refused.error.reason}: a retry carries retryAfter (whole seconds, 1 to 86400) and the reason in message`,
    );
  }
  const [first] = play.rounds;
  if (!first?.final?.reply) {
    return fail(`the retry probe (${given}) got no final reply within ${seconds(waitedMs)}: answer retry when not ready yet`);
  }
  if (first.final.reply.outcome !== 'retry') {
    return fail(
      `the retry probe (${given}) was answered ${replyLine(first.final)}, not retry: give the --retry-param values that make the hook ask to be asked again`,
    );
  }
  for (const round of play.rounds) {
    const got = round.final?.reply;
    if (!got) {
      return fail(
        `attempt ${round.attempt}, asked after the hook's retry, got no final reply within ${seconds(waitedMs)}: a retry ends its attempt, and the gate's next attempt (a new id) must be run and answered`,
      );
    }
    if (got.attempt !== round.attempt) {
      return fail(
        `attempt ${round.attempt} was answered with a reply for attempt ${got.attempt} (${replyLine(round.final as ReceivedReply)}): run each attempt afresh and answer it with its own correlationid`,
      );
    }
  }
  // A retry ends its attempt: nothing but the same retry may follow it for that attempt.
  const retried = new Set(play.rounds.filter((r) => r.final?.reply?.outcome === 'retry').map((r) => r.attempt));
  const late = play.replies.find((r) => r.reply && retried.has(r.reply.attempt) && r.reply.outcome !== 'retry');
  if (late?.reply) {
    return fail(
      `after asking to be asked again, attempt ${late.reply.attempt} still sent ${replyLine(late)}: the gate refuses it (a stale attempt); stop the work when you answer retry`,
    );
  }
  const last = play.rounds[play.rounds.length - 1] as RetryRound;
  if (last.final?.reply?.outcome === 'retry') {
    return fail(
      `the hook asked to be asked again ${play.rounds.length} times in a row: the gate fails it after spec.retryAfter.maxRetries (default ${MAX_CHECKED_RETRIES})`,
    );
  }
  const story = play.rounds
    .map((r) => {
      const said = `attempt ${r.attempt}: ${replyLine(r.final as ReceivedReply)}`;
      if (r.waitedMs === undefined) return said;
      return `${said} after ${r.final?.reply?.retryAfter} s, asked again ${seconds(r.waitedMs)} later${r.cut ? ' (the checker cut the delay to its timeout)' : ''}`;
    })
    .join('; ');
  return { rule: RULE, passed: true, detail: story };
}

/** A retry reply the gate refuses, sent to any probe: R11 fails with it even without --retry-param. */
export function refusedRetry(replies: readonly ReceivedReply[]): Check | undefined {
  const bad = replies.find((r) => r.error && r.event && outcomeOf(r.event) === 'retry');
  if (!bad?.error) return undefined;
  return {
    rule: RULE,
    passed: false,
    detail: `a retry reply the gate refuses: ${bad.error.code}: ${bad.error.reason}: a retry carries retryAfter (whole seconds, 1 to 86400) and the reason in message`,
  };
}

function outcomeOf(event: CloudEventRecord): unknown {
  const data = jsonData(event);
  return data.ok && typeof data.data === 'object' && data.data !== null ? (data.data as { outcome?: unknown }).outcome : undefined;
}
