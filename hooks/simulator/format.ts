// The simulation as the terminal shows it: the exchange, the replies, then the gate's decision.
import type { CloudEventRecord } from '../../schemas/event.ts';
import type { Answer } from '../conformance/post.ts';
import { describeReplyLive } from './live.ts';
import type { SimulationResult } from './simulate.ts';
import type { Verdict } from './verdict.ts';

export function formatExchange(url: string, request: CloudEventRecord, answer: Answer): string {
  const data = request.data as { revision: { namespace: string; name: string }; hook: { name: string; params: unknown } };
  const got =
    answer.status === undefined
      ? `none (${answer.error})`
      : `${answer.status}${answer.body.length > 0 ? ` with a ${answer.body.length}-byte body` : ''}`;
  return [
    `request  → ${url}: revision.prestart.requested for ${data.revision.namespace}/${data.revision.name}, hook ${data.hook.name}, params ${JSON.stringify(data.hook.params)}`,
    `answer   ← ${got} after ${answer.ms} ms`,
  ].join('\n');
}

export function formatVerdict(verdict: Verdict): string {
  const lines = verdict.steps.map((step) => `gate     : ${step}`);
  lines.push(`decision : ${verdict.released ? 'RELEASED' : 'HELD'} (${verdict.why.replace(/^(released|held): /, '')})`);
  if (verdict.injected.length > 0) {
    lines.push("injected into the Revision's pods (user-container):");
    for (const line of verdict.injected) lines.push(`  ${line}`);
    lines.push('JSON patch on a sample pod:');
    for (const op of verdict.patch) lines.push(`  ${JSON.stringify(op)}`);
  } else if (verdict.released) {
    lines.push('no contributions: the pods start unchanged');
  }
  return lines.join('\n');
}

export function formatSimulation(result: SimulationResult): string {
  return [
    formatExchange(result.url, result.request, result.answer),
    ...result.replies.map(describeReplyLive),
    formatVerdict(result.verdict),
  ].join('\n');
}
