// The gate's functional core: pure decisions over plain data. The shell observes, calls these and
// applies what they return.

export { type FilteredContributions, filterContributions } from './contributions.ts';
export { DIGEST_GRACE_MS, decide, FOREIGN_RUN_REQUEUE_MS, HOOK_CACHE_GRACE_MS } from './decide.ts';
export { decideRevision } from './decide-revision.ts';
export { DurationError, formatDuration, parseDurationMs, parseDurationSeconds } from './duration.ts';
export { runStatusOf, STARTED_STATUS_DELAY_MS } from './first-stage.ts';
export { forceRelease } from './force-release.ts';
export {
  type PodContainer,
  type PodEnvFrom,
  type PodEnvVar,
  type PodView,
  type PodVolumeMount,
  podPatch,
  QUEUE_PROXY,
  SERVICE_BINDING_ROOT,
  volumeNameFor,
} from './inject.ts';
export { escapePointerToken, type JsonPatchOp, pointer } from './jsonpatch.ts';
export { compareHooks, hookMatches, hooksFor, labelSelectorErrors, labelSelectorMatches } from './match.ts';
export {
  CLUSTER_ORDER_MAX,
  DEFAULT_CLUSTER_DOMAIN,
  DEFAULT_NAMESPACED_HOOK_LIMIT,
  hookKind,
  MAX_NAMESPACED_HOOK_LIMIT,
  NAMESPACED_ORDER_BASE,
  namespacedHook,
  namespacedHookName,
  namespaceOfHook,
  runOrder,
  serviceOfAddress,
  type TargetService,
  targetProblem,
} from './namespaced-hooks.ts';
export {
  applyReply,
  deliveryFailureReply,
  GATE_REPLY_KEY,
  idRunUID,
  invalidReplyFailure,
  type RequestRef,
  requestRef,
} from './reply.ts';
export { sendKey } from './resend.ts';
export {
  getCommand,
  type RevisionCondition,
  retryCommand,
  revisionConditionFor,
  withRevisionCondition,
} from './revision-condition.ts';
export { HookSpecError, snapshotHook } from './snapshot.ts';
export { parseHookNames, type StampResult, stampRevision } from './stamp.ts';
export { contributionsOf } from './status.ts';
export type * from './types.ts';
