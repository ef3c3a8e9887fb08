// Receivers of completed replies: what the gate mounts (HTTP) or starts (NATS).
export { DEFAULT_SINK_MAX_BYTES, type HttpSinkOptions, installSinkRoutes, SINK_PATHS } from './http.ts';
export { countReply, createSinkMetrics, type SinkMetrics } from './metrics.ts';
export { createNatsSink, DEFAULT_REPLIES_DURABLE, type NatsSink, type NatsSinkOptions } from './nats.ts';
export type { OnReply, ReplyDisposition, SinkOutcome } from './types.ts';
