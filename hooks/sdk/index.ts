// The hook SDK: write one handler, serve it over HTTP or NATS JetStream.
export { isDns1123Label, isDns1123Subdomain } from '../../api/names.ts';
export type { NatsSecurity, NatsTls } from '../../schemas/nats-auth.ts';
export { allowedOnly, envContribution, envFromContribution, volumeContribution } from './contributions.ts';
export {
  createHookApp,
  DEFAULT_SYNC_BUDGET_MS,
  type HookApp,
  type HookServer,
  type ServeHookOptions,
  serveHook,
} from './http.ts';
export { BoundedMap } from './lru.ts';
export { type NatsHookService, type SendReplyOptions, type ServeHookNatsOptions, sendReply, serveHookNats } from './nats.ts';
export { natsSecurityFromEnv } from './nats-env.ts';
export { clip, defaultSource, errorEvent, finalEvent, MAX_MESSAGE, progressEvent } from './outcome.ts';
export { attemptKey, imagesToRun, toHookRequest } from './request.ts';
export { createHookRunner, type HookRunner, type HookRunnerOptions, type Job, type ProgressSender, type Submission } from './runner.ts';
export { DEFAULT_SEND_POLICY, type PostOptions, postEvent, SendError } from './send.ts';
export { DEFAULT_TOKEN_FILE, TOKEN_FILE_ENV, tokenFileSource } from './token-file.ts';
export {
  CancelledError,
  type Contribution,
  type ContributionKind,
  DeadlineError,
  fail,
  type HookContainer,
  type HookContext,
  type HookHandler,
  type HookOutcome,
  type HookRequest,
  type HookRevision,
  retryAfter,
  succeed,
} from './types.ts';
