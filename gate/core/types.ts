// The functional core's own vocabulary: what it observes and the actions it decides. The API
// types it decides over live in api/types.ts, the floor every layer shares.
import type {
  Condition,
  ContainerImage,
  HookSnapshot,
  PrestartHook,
  PrestartRunSpec,
  PrestartRunStatus,
  PrestartRunView,
  RevisionView,
} from '../../api/types.ts';

/** Everything the core needs to decide, observed by the shell at one moment. */
export interface Observed {
  revision: RevisionView;
  /** Current PrestartHook objects by name (used to snapshot hooks when the run is created). */
  hooks: ReadonlyMap<string, PrestartHook>;
  run?: PrestartRunView;
  /** Name of a newer Revision of the same Configuration, when there is one. */
  supersededBy?: string;
  /** True when a Route/Service traffic target names this Revision explicitly. */
  namedByTraffic: boolean;
  now: Date;
  /**
   * When this replica started leading (its controller started). A hook whose deadline came while
   * no leader acted (an outage) is asked once more and given a grace period before it times out.
   */
  leaderSince?: Date;
  /**
   * When this leader, in this term, last sent each hook's attempt of the run (ms since the epoch,
   * keyed by sendKey(hook, attempt)). Resends are not written to the run (resend.ts): this is
   * what spaces them. Empty at a term's start, so a new leader asks every Requested hook once.
   */
  sent?: ReadonlyMap<string, number>;
}

/** A request the status a run is created with records as sent (decide's startRun). */
export interface FirstRequest {
  hook: HookSnapshot;
  attempt: number;
  deadline: string;
}

export type Action =
  /**
   * status: what the run starts as. storeStatus false: a run started with its first stage
   * requested (spec.startedAt), whose status follows from the spec (first-stage.ts statusOf) and
   * is stored later; true: written right after the create.
   * requests: the ones the created run records as sent. The shell sends them once the create
   * (and the status write, if any) returned, named by the created run's UID: the UID is unknown
   * until the create returns, which is why they are not sendRequest actions.
   */
  | { type: 'createRun'; spec: PrestartRunSpec; status: PrestartRunStatus; storeStatus: boolean; requests: FirstRequest[] }
  | { type: 'updateRunStatus'; status: PrestartRunStatus }
  /**
   * Write spec.containers on the run (its only spec change, once, while absent: the CRD's rule):
   * what the hooks are asked about, stored before anything asks them (record, then send).
   */
  | { type: 'recordContainers'; containers: ContainerImage[] }
  /** Sent after the status that records it was written (record, then send). runUID: the run it is for (PrestartRunView.uid). */
  | { type: 'sendRequest'; runUID: string | undefined; hook: HookSnapshot; attempt: number; deadline: string }
  | { type: 'sendCancel'; runUID: string | undefined; hook: HookSnapshot; attempt: number; reason: string }
  /**
   * Remove the hold label and the cancel finalizer; add the inject label when there are
   * contributions. containers: what the run recorded; the release applies only while Knative's
   * status digests are still exactly these (test operations in the patch), so a status written
   * between the decision and the release cannot slip through. Absent for a break-glass release
   * and a run of an earlier release that recorded none.
   */
  | { type: 'release'; inject: boolean; containers?: ContainerImage[] }
  /** Set (or clear, when undefined) the reason annotation that the hold policy's message shows. */
  | { type: 'setHoldReason'; reason: string | undefined }
  | { type: 'removeFinalizer' }
  /** Set the gate's own condition (PRESTART_CONDITION) on the Revision's status; the shell keeps every other condition. */
  | { type: 'setRevisionCondition'; condition: Condition }
  | { type: 'recordEvent'; eventType: 'Normal' | 'Warning'; reason: string; message: string };

export interface Decision {
  actions: Action[];
  /** Reconcile again after this long even if nothing changes (deadlines, resends). */
  requeueAfterMs?: number;
}

export type ReplyResult =
  | { type: 'applied'; status: PrestartRunStatus }
  | { type: 'progress'; status: PrestartRunStatus }
  | { type: 'duplicate' }
  | { type: 'rejected'; reason: string; permanent: true };
