// Short human readings of answers and replies, shared by the checks' messages.
import { bodyExcerpt, carriesCloudEvent } from '../../schemas/http-binding.ts';
import type { Answer } from './post.ts';
import type { ReceivedReply } from './reply-sink.ts';

export function is2xx(a: Answer): boolean {
  return a.status !== undefined && a.status >= 200 && a.status < 300;
}

export function is4xx(a: Answer): boolean {
  return a.status !== undefined && a.status >= 400 && a.status < 500;
}

/** "answered 202", "answered 500: {"error":...}", "got no answer (ECONNREFUSED)". */
export function answerLine(a: Answer): string {
  if (a.status === undefined) return `got no answer (${a.error ?? 'unknown error'})`;
  return a.body.length > 0 ? `answered ${a.status}: ${bodyExcerpt(a.body, 120)}` : `answered ${a.status}`;
}

/** Why a 2xx answer's body would break a Broker, or undefined when it is fine. */
export function bodyProblem(a: Answer): string | undefined {
  if (!is2xx(a) || a.body.length === 0 || carriesCloudEvent(a.headers)) return undefined;
  const type = a.headers['content-type'] ?? 'no content-type';
  return `${a.what} was answered ${a.status} with a body that is not a CloudEvent (${type}): ${bodyExcerpt(a.body, 80)}`;
}

export function isFinal(r: ReceivedReply): boolean {
  return r.reply !== undefined && r.reply.outcome !== 'progress';
}

/** `succeeded "db ready" + 2 contributions`, or `refused by the gate (bad-replyid: ...)`. */
export function replyLine(r: ReceivedReply): string {
  if (!r.reply) return `a reply the gate refuses (${r.error?.code}: ${r.error?.reason})`;
  const { outcome, message, progress, contributions } = r.reply;
  const parts: string[] = [outcome];
  if (progress !== undefined && outcome === 'progress') parts.push(`${progress}%`);
  if (message !== undefined) parts.push(JSON.stringify(message.length > 80 ? `${message.slice(0, 79)}…` : message));
  if (contributions?.length) parts.push(`+ ${contributions.length} contribution${contributions.length === 1 ? '' : 's'}`);
  return parts.join(' ');
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Long ids shortened for one-line messages. */
export function short(text: string, max = 24): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
