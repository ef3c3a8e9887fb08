// Sends the author's hook the request the gate would send for a made-up Revision, collects the
// reply (in the answer, or posted to a local sink later) and says what the gate would decide.
// The HTTP answer is read with the gate's own rules (classifyHookResponse), so a hook the gate
// would fail fails here the same way.

import type { ContributionKind, Reply } from '../../api/types.ts';
import { classifyHookResponse } from '../../emitter/http-response.ts';
import { deliveryFailureReply, invalidReplyFailure, requestRef } from '../../gate/core/index.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { bodyExcerpt } from '../../schemas/http-binding.ts';
import { buildRequested, gateSource, KeyRing, toBinary } from '../../schemas/index.ts';
import { isFinal } from '../conformance/describe.ts';
import { type Answer, deliver } from '../conformance/post.ts';
import { type ReceivedReply, readReply, startReplySink } from '../conformance/reply-sink.ts';
import { buildScenario, DEMO_NAMESPACE } from './scenario.ts';
import { judge, type Verdict } from './verdict.ts';

export interface SimulateOptions {
  /** The hook name. Default "demo-hook". */
  hook?: string;
  params?: Record<string, unknown>;
  annotations?: Record<string, string>;
  allowed?: ContributionKind[];
  /** How long to wait for a final reply. Default 60 s. */
  timeoutMs?: number;
  /** Called once the hook answered the request. */
  onAnswer?: (request: CloudEventRecord, answer: Answer) => void;
  /** Called as each reply arrives (progress reports included). */
  onReply?: (reply: ReceivedReply) => void;
}

export interface SimulationResult {
  url: string;
  request: CloudEventRecord;
  answer: Answer;
  /** Every reply, in the order received; refused ones carry `error`. */
  replies: ReceivedReply[];
  verdict: Verdict;
}

export const DEFAULT_SIMULATED_HOOK = 'demo-hook';

export async function simulate(url: string, opts: SimulateOptions = {}): Promise<SimulationResult> {
  const hook = opts.hook ?? DEFAULT_SIMULATED_HOOK;
  const keys = new KeyRing([KeyRing.generateKey()]);
  const sink = await startReplySink(keys);
  try {
    if (opts.onReply) sink.onReply(opts.onReply);
    const scenario = buildScenario({
      hook,
      url,
      ...(opts.params ? { params: opts.params } : {}),
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
      ...(opts.allowed ? { allowed: opts.allowed } : {}),
    });
    const request = buildRequested({
      revision: scenario.observed.revision,
      hook: scenario.send.hook,
      runUID: scenario.send.runUID,
      attempt: scenario.send.attempt,
      deadline: scenario.send.deadline,
      action: 'start',
      containers: scenario.send.containers,
      replyTo: sink.url,
      source: gateSource(DEMO_NAMESPACE),
      keys,
    });
    const answer = await deliver(url, toBinary(request), 'simulate', 'the request', 10_000);
    opts.onAnswer?.(request, answer);
    const replies: ReceivedReply[] = [];
    let synthetic: Reply | undefined;
    let waiting: string | undefined;
    // The gate's own rules for what the answer does to the hook (gate/core/reply.ts).
    const ref = requestRef(scenario.observed.revision, scenario.send.runUID, hook, scenario.send.attempt);

    if (answer.status === undefined) {
      waiting = `the request was not delivered (${answer.error})`;
    } else {
      const verdict = classifyHookResponse(answer.status, answer.headers, answer.body.length, bodyExcerpt(answer.body));
      if (verdict.type === 'replied') {
        const r = readReply({ headers: answer.headers, body: answer.body }, keys, 'answer', answer.sentAt + answer.ms);
        replies.push(r);
        opts.onReply?.(r);
        if (r.error) synthetic = invalidReplyFailure(ref, r.error.reason);
      } else if (verdict.type === 'fail' || verdict.type === 'retry') {
        // The same words the HTTP transport gives its TransportError.
        synthetic = deliveryFailureReply(ref, { retriable: verdict.type === 'retry', reason: `POST ${url}: ${verdict.reason}` });
        if (!synthetic) waiting = `the hook ${verdict.reason}, which the gate retries`;
      } else {
        const final = await sink.waitFor(isFinal, opts.timeoutMs ?? 60_000);
        if (!final) waiting = `no final reply within ${formatSeconds(opts.timeoutMs ?? 60_000)}`;
      }
    }
    replies.push(...sink.replies);
    const refused = replies.find((r) => r.error && r.via === 'sink');
    if (!waiting && refused?.error && !replies.some(isFinal))
      waiting = `the gate refuses the reply (${refused.error.code}: ${refused.error.reason})`;
    const verified = replies.flatMap((r) => (r.reply ? [r.reply] : []));
    const verdict = judge(scenario, synthetic ? [...verified, synthetic] : verified, new Date(), waiting);
    return { url, request, answer, replies, verdict };
  } finally {
    await sink.close();
  }
}

function formatSeconds(ms: number): string {
  return ms < 10_000 ? `${Number((ms / 1000).toFixed(1))}s` : `${Math.round(ms / 1000)}s`;
}
