// Judging what came back. Pure: each function takes the answers and replies seen and returns one
// Check, so the wording of every failure is tested without a hook to misbehave.
import { EXT_REPLY_ID } from '../../schemas/index.ts';
import { answerLine, bodyProblem, is2xx, is4xx, isFinal, replyLine, seconds, short } from './describe.ts';
import type { Answer } from './post.ts';
import type { ReceivedReply } from './reply-sink.ts';
import { type Check, FAST_ANSWER_MS, type RuleId } from './rules.ts';

// Refusals about the reply's identity are R6's; every other refusal is a bad reply (R1).
const IDENTITY_CODES = new Set(['bad-replyid', 'hook-mismatch']);

const check = (rule: RuleId, passed: boolean, detail: string): Check => ({ rule, passed, detail });

/**
 * R1: a valid request is taken and a final reply the gate accepts comes back. R9 asks the same of
 * a request carrying members this protocol version does not define.
 */
export function checkReplies(
  answer: Answer,
  replies: readonly ReceivedReply[],
  waitedMs: number,
  rule: RuleId = 'R1-replies-with-valid-completed',
): Check {
  // R9's failures add why the request was special: the hook most likely refuses unknown members.
  const newer = rule === 'R9-takes-newer-requests' ? ' (it carries data members a newer gate may add: ignore members you do not know)' : '';
  if (!is2xx(answer)) {
    return check(
      rule,
      false,
      `${answer.what} ${answerLine(answer)}${newer}: take a valid request (202) or answer it (200 with the completed event); report failures as a "failed" reply, not an HTTP error`,
    );
  }
  const refused = replies.find((r) => r.error && !IDENTITY_CODES.has(r.error.code));
  if (refused?.error) {
    const where = refused.via === 'answer' ? `the completed event in the ${answer.status} answer` : 'a reply posted to replyTo';
    return check(rule, false, `${answer.what}: the gate refuses ${where}: ${refused.error.code}: ${refused.error.reason}`);
  }
  const final = replies.find(isFinal);
  const progress = replies.filter((r) => r.reply?.outcome === 'progress').length;
  const counted = `${progress} progress report${progress === 1 ? '' : 's'}`;
  const reports = progress > 0 ? ` and ${counted}` : '';
  if (!final) {
    if (replies.some((r) => r.error)) return check(rule, false, `${answer.what}: no reply the gate accepts (see R6)`);
    return check(
      rule,
      false,
      `${answer.what} ${answerLine(answer)}, then no final completed event (succeeded or failed) within ${seconds(waitedMs)}${progress > 0 ? ` (only ${counted})` : ''}${newer}: post it to data.replyTo (unset K_SINK for this check) and make sure the service serves this hook name (--hook)`,
    );
  }
  const how = final.via === 'answer' ? `in the ${answer.status} answer` : `posted to replyTo ${seconds(final.at - answer.sentAt)} later`;
  return check(rule, true, `${answer.what}: ${replyLine(final)} ${how}${reports}`);
}

export interface Redelivery {
  first: Answer;
  whileRunning?: Answer;
  afterFinish?: Answer;
  /** Replies to the request up to the moment it was sent again after finishing. */
  before: readonly ReceivedReply[];
  /** Replies after that moment. */
  after: readonly ReceivedReply[];
  waitedMs: number;
}

/** R2: repeats are taken, joined while running, and answered with the same result once finished. */
export function checkRedelivery(d: Redelivery): Check {
  const rule = 'R2-idempotent-on-redelivery';
  for (const a of [d.whileRunning, d.afterFinish]) {
    if (a && !is2xx(a)) return check(rule, false, `${a.what} ${answerLine(a)}: take a repeated delivery like the first one (2xx)`);
  }
  const firstFinals = d.before.filter(isFinal);
  const first = firstFinals[0];
  if (!first?.reply || !d.afterFinish) return check(rule, false, 'not checked: the valid request got no final reply (see R1)');
  const ids = [...new Set(firstFinals.map((r) => r.event?.id))];
  if (d.whileRunning && ids.length > 1) {
    const outcomes = firstFinals.map(replyLine).join(', then ');
    return check(
      rule,
      false,
      `delivered twice while it ran, the request got ${ids.length} different final replies (${outcomes}): the handler ran twice; a repeat of a running request must join it`,
    );
  }
  const again = d.after.filter(isFinal);
  if (again.length === 0) {
    return check(
      rule,
      false,
      `sent again after it finished (${replyLine(first)}), the request got no reply within ${seconds(d.waitedMs)}: remember finished results and send the same one again (the gate re-sends unanswered requests until the deadline)`,
    );
  }
  for (const r of again) {
    if (r.reply?.outcome !== first.reply.outcome) {
      return check(
        rule,
        false,
        `sent again after it finished, the request got a different outcome: first ${replyLine(first)}, then ${replyLine(r)}: the handler ran twice; remember finished results and send the same one again`,
      );
    }
    if (!sameResult(first, r)) {
      return check(
        rule,
        false,
        `sent again after it finished, the request got a different result: first ${replyLine(first)}, then ${replyLine(r)}: the handler ran twice; send the stored result again`,
      );
    }
  }
  const joined = d.whileRunning ? 'a repeat while it ran joined the run; ' : '';
  const same = again.every((r) => r.event?.id === first.event?.id)
    ? `the same reply (id ${short(String(first.event?.id))})`
    : 'an identical result (under a new event id; the gate takes it as a duplicate)';
  return check(rule, true, `${joined}a repeat after it finished got ${same}`);
}

function sameResult(a: ReceivedReply, b: ReceivedReply): boolean {
  return (
    a.reply?.message === b.reply?.message && JSON.stringify(a.reply?.contributions ?? []) === JSON.stringify(b.reply?.contributions ?? [])
  );
}

/** R3, R4, R8: something no hook may act on. `refuse`: it must also be answered 4xx. */
export function checkNotActedOn(
  rule: RuleId,
  answer: Answer,
  replies: readonly ReceivedReply[],
  expected: { refuse: boolean; advice: string },
): Check {
  if (expected.refuse && !is4xx(answer)) {
    return check(rule, false, `${answer.what} ${answerLine(answer)}: refuse it with a 4xx and a reason (${expected.advice})`);
  }
  if (!expected.refuse && answer.status !== undefined && answer.status >= 500) {
    return check(rule, false, `${answer.what} ${answerLine(answer)}: a Broker retries 5xx; answer 202 and leave it (${expected.advice})`);
  }
  if (answer.status === undefined) return check(rule, false, `${answer.what} ${answerLine(answer)}`);
  const acted = replies[0];
  if (acted) return check(rule, false, `${answer.what} was acted on: it got ${replyLine(acted)} (${expected.advice})`);
  return check(rule, true, `${answer.what} ${answerLine(answer)} and got no reply`);
}

/** R8: a cancel is taken. */
export function checkCancelTaken(answer: Answer): Check {
  const rule = 'R8-honours-cancel';
  if (is2xx(answer)) return check(rule, true, `${answer.what} ${answerLine(answer)}`);
  return check(
    rule,
    false,
    `${answer.what} ${answerLine(answer)}: take a cancel with 202 and stop the work for that Revision, hook and attempt`,
  );
}

/** R5 over every answer. */
export function checkBodies(answers: readonly Answer[]): Check {
  const rule = 'R5-no-non-cloudevent-2xx-body';
  const problems = answers.map(bodyProblem).filter((p): p is string => p !== undefined);
  if (problems.length === 0)
    return check(rule, true, `${answers.filter(is2xx).length} 2xx answers, none with a body that is not a CloudEvent`);
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : '';
  return check(
    rule,
    false,
    `${problems[0]}${more}: a Broker turns that into a 502 and retries, so the hook runs again; answer 202 with an empty body`,
  );
}

/** R6 over every reply, wherever it came from. */
export function checkReplyIds(replies: readonly ReceivedReply[], correlationOf: (r: ReceivedReply) => string | undefined): Check {
  const rule = 'R6-reply-carries-replyid';
  const bad = replies.filter((r) => r.error && IDENTITY_CODES.has(r.error.code));
  const first = bad[0];
  if (!first?.error) {
    const n = replies.filter((r) => r.reply).length;
    return check(rule, true, n === 0 ? 'no replies to check' : `${n} replies, each with its request's correlationid as replyid`);
  }
  const more = bad.length > 1 ? ` (and ${bad.length - 1} more)` : '';
  const id = first.event?.id === undefined ? 'a reply' : `reply ${short(first.event.id)}`;
  if (first.error.code === 'hook-mismatch')
    return check(
      rule,
      false,
      `${id}: ${first.error.reason}${more}: copy prestarthook and prestartattempt from the request, or leave them out`,
    );
  const given = first.event?.[EXT_REPLY_ID];
  const expected = correlationOf(first);
  const got = given === undefined ? 'has no replyid' : `has replyid ${JSON.stringify(short(String(given), 64))}`;
  const want =
    expected === undefined
      ? "matches no request's correlationid"
      : `is not the request's correlationid ${JSON.stringify(short(expected, 40))}`;
  return check(rule, false, `${id} ${got}, which ${want}${more}: copy the request's ce-correlationid into ce-replyid byte for byte`);
}

/** R7 over every answer. */
export function checkSpeed(answers: readonly Answer[]): Check {
  const rule = 'R7-answers-fast';
  const slow = answers.filter((a) => a.ms >= FAST_ANSWER_MS).sort((a, b) => b.ms - a.ms);
  const worst = slow[0];
  if (!worst) {
    const slowest = Math.max(0, ...answers.map((a) => a.ms));
    return check(rule, true, `${answers.length} deliveries, the slowest answered in ${slowest} ms`);
  }
  const more = slow.length > 1 ? ` (and ${slow.length - 1} more)` : '';
  const when = worst.status === undefined ? `got no answer within ${seconds(worst.ms)}` : `was answered after ${seconds(worst.ms)}`;
  return check(
    rule,
    false,
    `${worst.what} ${when}${more} (limit ${seconds(FAST_ANSWER_MS)}): answer 202 at once and do the work in the background`,
  );
}

/**
 * R10: with sender identity on, the gate's sink refuses a reply without its hook's ServiceAccount
 * token (401). The checker has no apiserver to review the token: it checks that one is sent. Only
 * run with --identity: a rule not checked is left out of the report, not counted as passed.
 */
export function checkReplyTokens(replies: readonly ReceivedReply[]): Check {
  const rule = 'R10-reply-carries-token';
  const posted = replies.filter((r) => r.via === 'sink');
  const missing = posted.filter((r) => !r.bearer);
  if (posted.length === 0) return check(rule, true, 'no replies were posted to the sink (answers in the response body need no token)');
  if (missing.length === 0) return check(rule, true, `${posted.length} replies posted, each with a bearer token`);
  return check(
    rule,
    false,
    `${missing.length} of ${posted.length} replies posted to the sink carry no Authorization: Bearer header: send the projected ServiceAccount token (PRESTART_TOKEN_FILE) with every reply`,
  );
}
