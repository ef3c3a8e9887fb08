// What the sinks need from the gate, and what they tell it. The sinks only parse and verify; the
// gate decides what a verified reply does to the PrestartRun.
import type { Reply } from '../api/types.ts';

/** What became of a verified reply. A thrown error means "could not decide now" (transient). */
export type ReplyDisposition = { type: 'applied' } | { type: 'duplicate' } | { type: 'rejected'; reason: string };

export type OnReply = (reply: Reply) => Promise<ReplyDisposition>;

/** How a sink answered one incoming event, for logs and metrics. */
export type SinkOutcome = 'applied' | 'duplicate' | 'rejected' | 'invalid' | 'transient';
