// Plays the gate against a running hook service: negative probes first (nothing may come of
// them), then the valid requests, their repeats and the cancels, then a quiet period in which
// late replies to the negative probes would still show up. Every probe is judged in checks.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { isDns1123Subdomain } from '../../api/names.ts';
import type { Message } from '../../schemas/event.ts';
import { carriesCloudEvent } from '../../schemas/http-binding.ts';
import { EXT_CORRELATION_ID, KeyRing, toBinary, toStructured } from '../../schemas/index.ts';
import {
  checkBodies,
  checkCancelTaken,
  checkNotActedOn,
  checkRedelivery,
  checkReplies,
  checkReplyIds,
  checkReplyTokens,
  checkSpeed,
} from './checks.ts';
import { is2xx, isFinal } from './describe.ts';
import { type Answer, deliver, reachable } from './post.ts';
import { cancelOf, malformedProbes, newerRequest, nextAttemptOf, type ProbeContext, probeOf, startRequest } from './probes.ts';
import { type ReceivedReply, readReply, startReplySink } from './reply-sink.ts';
import { checkRetry, playRetries, RETRY_PROBE, refusedRetry } from './retry.ts';
import type { Check, Report } from './rules.ts';

export interface ConformanceOptions {
  /** The hook name the service serves. Default "conformance". */
  hook?: string;
  /** How long to wait for a final reply. Default 30 s. */
  timeoutMs?: number;
  /** data.hook.params of every probe. */
  params?: Record<string, unknown>;
  /** How long to wait for the service to accept connections. Default 20 s. */
  waitForHookMs?: number;
  /** How long to keep listening for stray replies at the end. Default: as long as the slowest reply took, 1 s at least. */
  quietMs?: number;
  /** Sender identity is on: every reply posted to the sink must carry a bearer token (R10). */
  identity?: boolean;
  /** data.hook.params that make the hook answer retry (ask me again): the checker then plays the gate's retries (R11). */
  retryParams?: Record<string, unknown>;
}

export const DEFAULT_CONFORMANCE_HOOK = 'conformance';
// A delivery gets this long for an HTTP answer; R7 judges anything over 2 s anyway.
const ANSWER_TIMEOUT_MS = 10_000;

export async function runConformance(url: string, opts: ConformanceOptions = {}): Promise<Report> {
  const hook = opts.hook ?? DEFAULT_CONFORMANCE_HOOK;
  if (!isDns1123Subdomain(hook)) throw new Error(`hook name "${hook}" is not a DNS-1123 subdomain, so no PrestartHook can have it`);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const keys = new KeyRing([KeyRing.generateKey()]);
  const sink = await startReplySink(keys);
  const finish = (checks: Check[]): Report => ({ url, hook, checks, passed: checks.every((c) => c.passed) });
  try {
    const down = await reachable(url, opts.waitForHookMs ?? 20_000);
    if (down) return finish([{ rule: 'R1-replies-with-valid-completed', passed: false, detail: down }]);

    const ctx: ProbeContext = { keys, hook, replyTo: sink.url, params: opts.params ?? {}, deadlineMs: 10 * 60_000 };
    const answers: Answer[] = [];
    const inAnswers: ReceivedReply[] = [];
    const correlation = new Map<string, string>();
    const send = async (message: Message, probe: string, what: string): Promise<Answer> => {
      const answer = await deliver(url, message, probe, what, ANSWER_TIMEOUT_MS);
      answers.push(answer);
      if (is2xx(answer) && answer.body.length > 0 && carriesCloudEvent(answer.headers)) {
        inAnswers.push(readReply({ headers: answer.headers, body: answer.body }, keys, 'answer', answer.sentAt + answer.ms));
      }
      return answer;
    };
    const repliesTo = (probe: string) => [...sink.replies, ...inAnswers].filter((r) => probeOf(r) === probe);
    // A reply the gate would refuse ends the wait too: the hook has answered, badly. `earlier`: replies
    // seen before this wait began, which do not end it (a set, not a time: two replies can share a ms).
    const ends = (probe: string, earlier: ReadonlySet<ReceivedReply>) => (r: ReceivedReply) =>
      !earlier.has(r) && probeOf(r) === probe && (isFinal(r) || r.error !== undefined);
    const finalFor = async (probe: string, answer: Answer, waitMs: number, earlier: ReadonlySet<ReceivedReply> = new Set()) => {
      const inBody = inAnswers.find(ends(probe, earlier));
      if (inBody || !is2xx(answer)) return inBody;
      return sink.waitFor(ends(probe, earlier), waitMs);
    };

    // Nothing may come of these.
    const malformed = malformedProbes(ctx);
    const malformedAnswers: Answer[] = [];
    for (const m of malformed) malformedAnswers.push(await send(m.message, m.probe, m.what));
    const otherHook = `${hook}-other`;
    const other = await send(toBinary(startRequest(ctx, 'other-hook', otherHook)), 'other-hook', `a request for hook "${otherHook}"`);
    const early = startRequest(ctx, 'cancel-first');
    const earlyCancel = await send(
      toBinary(cancelOf(ctx, early, 'superseded (conformance check)')),
      'cancel-first',
      'a cancel sent before its start',
    );
    const lateStart = await send(toBinary(early), 'cancel-first', 'a start whose cancel came first');

    // The valid requests, in both content modes, and the repeats.
    const valid = startRequest(ctx, 'valid');
    correlation.set('valid', String(valid[EXT_CORRELATION_ID]));
    const first = await send(toBinary(valid), 'valid', 'the valid request (binary mode)');
    const answeredInBody = inAnswers.some((r) => probeOf(r) === 'valid' && isFinal(r));
    const whileRunning =
      is2xx(first) && !answeredInBody ? await send(toBinary(valid), 'valid', 'the valid request repeated while it runs') : undefined;
    const structuredEvent = startRequest(ctx, 'structured');
    correlation.set('structured', String(structuredEvent[EXT_CORRELATION_ID]));
    const structured = await send(toStructured(structuredEvent), 'structured', 'the valid request (structured mode)');
    const newerEvent = newerRequest(ctx, 'newer');
    correlation.set('newer', String(newerEvent[EXT_CORRELATION_ID]));
    const newer = await send(toBinary(newerEvent), 'newer', 'a valid request with data members a newer gate may add');
    const running = startRequest(ctx, 'cancel-running');
    correlation.set('cancel-running', String(running[EXT_CORRELATION_ID]));
    await send(toBinary(running), 'cancel-running', 'a request cancelled while it runs');
    const cancel = await send(
      toBinary(cancelOf(ctx, running, 'Revision deleted (conformance check)')),
      'cancel-running',
      'a cancel of a running request',
    );

    const [firstFinal, structuredFinal, newerFinal] = await Promise.all([
      finalFor('valid', first, timeoutMs),
      finalFor('structured', structured, timeoutMs),
      finalFor('newer', newer, timeoutMs),
    ]);
    let afterFinish: Answer | undefined;
    // The valid request's replies that came before it was sent again after finishing.
    let beforeRepeat: ReadonlySet<ReceivedReply> | undefined;
    const firstLatency = firstFinal ? firstFinal.at - first.sentAt : 0;
    const againWaitMs = Math.min(timeoutMs, Math.max(3_000, 2 * firstLatency));
    if (firstFinal && isFinal(firstFinal)) {
      beforeRepeat = new Set(repliesTo('valid'));
      afterFinish = await send(toBinary(valid), 'valid', 'the valid request repeated after it finished');
      await finalFor('valid', afterFinish, againWaitMs, beforeRepeat);
    }
    // R11: asked for the params that make the hook answer retry, the checker asks again as the gate would.
    const retryCtx = opts.retryParams ? { ...ctx, params: opts.retryParams } : undefined;
    const retryStart = retryCtx ? startRequest(retryCtx, RETRY_PROBE) : undefined;
    const retryPlay =
      retryCtx && retryStart
        ? await playRetries(
            retryStart,
            {
              send: (request, what) => {
                correlation.set(RETRY_PROBE, String(request[EXT_CORRELATION_ID]));
                return send(toBinary(request), RETRY_PROBE, what);
              },
              finalFor: (answer, earlier) => finalFor(RETRY_PROBE, answer, timeoutMs, earlier),
              replies: () => repliesTo(RETRY_PROBE),
              nextAttempt: (attempt) => nextAttemptOf(retryCtx, retryStart, attempt),
            },
            timeoutMs,
          )
        : undefined;
    const slowest = Math.max(
      firstLatency,
      structuredFinal ? structuredFinal.at - structured.sentAt : 0,
      newerFinal ? newerFinal.at - newer.sentAt : 0,
    );
    await sleep(opts.quietMs ?? Math.min(timeoutMs, Math.max(1_000, slowest)));

    const validReplies = repliesTo('valid');
    const checks: Check[] = [
      checkReplies(first, validReplies, timeoutMs),
      checkReplies(structured, repliesTo('structured'), timeoutMs),
      checkRedelivery({
        first,
        ...(whileRunning ? { whileRunning } : {}),
        ...(afterFinish ? { afterFinish } : {}),
        before: beforeRepeat ? validReplies.filter((r) => beforeRepeat.has(r)) : validReplies,
        after: beforeRepeat ? validReplies.filter((r) => !beforeRepeat.has(r)) : [],
        waitedMs: againWaitMs,
      }),
      checkNotActedOn('R3-ignores-other-hooks', other, repliesTo('other-hook'), {
        refuse: false,
        advice: 'compare data.hook.name with the hook this service serves, and answer 202 without running',
      }),
      ...malformed.map((m, i) =>
        checkNotActedOn('R4-rejects-malformed', malformedAnswers[i] as Answer, repliesTo(m.probe), {
          refuse: true,
          advice: 'parse requests with the schemas (parseRequested) and answer its status and reason',
        }),
      ),
      checkCancelTaken(earlyCancel),
      checkNotActedOn('R8-honours-cancel', lateStart, repliesTo('cancel-first'), {
        refuse: false,
        advice: 'remember cancelled starts (source + the cancel id without /cancel) and do not begin a start that was already cancelled',
      }),
      checkCancelTaken(cancel),
      checkReplies(newer, repliesTo('newer'), timeoutMs, 'R9-takes-newer-requests'),
      checkBodies(answers),
      checkReplyIds([...sink.replies, ...inAnswers], (r) => {
        const probe = probeOf(r);
        return probe === undefined ? undefined : correlation.get(probe);
      }),
      checkSpeed(answers),
      ...(opts.identity ? [checkReplyTokens(sink.replies)] : []),
    ];
    const retryCheck =
      retryPlay && opts.retryParams ? checkRetry(retryPlay, opts.retryParams, timeoutMs) : refusedRetry([...sink.replies, ...inAnswers]);
    if (retryCheck) checks.push(retryCheck);
    return finish(checks);
  } finally {
    await sink.close();
  }
}
