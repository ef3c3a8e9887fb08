// One line per reply, printed as replies arrive.
import { replyLine } from '../conformance/describe.ts';
import type { ReceivedReply } from '../conformance/reply-sink.ts';

export function describeReplyLive(r: ReceivedReply): string {
  const how = r.via === 'answer' ? 'in the answer' : 'to the sink';
  return `reply    ← ${how}: ${replyLine(r)}`;
}
