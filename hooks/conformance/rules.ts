// The rules a hook service is checked against. Each names the part of docs/protocol.md it comes
// from, so a failure points the author at the text that explains it.

export const RULES = {
  'R1-replies-with-valid-completed': {
    title: 'a valid request gets a final revision.prestart.completed the gate accepts',
    section: 'docs/protocol.md#revisionprestartcompleted',
  },
  'R2-idempotent-on-redelivery': {
    title: 'the same request delivered again is not run again and gets the same result',
    section: 'docs/protocol.md#rules-for-hooks (1. Be idempotent)',
  },
  'R3-ignores-other-hooks': {
    title: 'a request for another hook name is not acted on',
    section: 'docs/protocol.md#context-attributes (prestarthook)',
  },
  'R4-rejects-malformed': {
    title: 'what is not a valid request is answered 4xx and not acted on',
    section: 'docs/protocol.md#rules-for-hooks (5. Treat requests as input from the network)',
  },
  'R5-no-non-cloudevent-2xx-body': {
    title: 'a 2xx answer has an empty body or is a CloudEvent',
    section: 'docs/protocol.md#rules-for-hooks (3. Never answer with a non-empty body that is not a CloudEvent)',
  },
  'R6-reply-carries-replyid': {
    title: "every reply's replyid is the request's correlationid, byte for byte",
    section: 'docs/protocol.md#correlationid-and-replyid',
  },
  'R7-answers-fast': {
    title: 'every delivery is answered within 2 s',
    section: 'docs/protocol.md#rules-for-hooks (2. Answer a delivery fast)',
  },
  'R8-honours-cancel': {
    title: 'a cancel is taken (2xx, empty body) and a start it overtook is not run',
    section: 'docs/protocol.md#cancel',
  },
  'R9-takes-newer-requests': {
    title: 'a request with data members the hook does not know (as a newer gate sends) is taken and answered',
    section: 'docs/protocol.md#revisionprestartrequested (hooks ignore data members they do not know)',
  },
  'R10-reply-carries-token': {
    title: 'with sender identity on (--identity), every reply posted to the sink carries Authorization: Bearer <token>',
    section: 'docs/protocol.md#sender-identity-direct-http',
  },
  'R11-retry-well-formed-and-honoured': {
    title:
      'a retry reply (ask me again) carries retryAfter and a reason, ends its attempt, and the next attempt asked after the delay is run afresh and answered',
    section: 'docs/protocol.md#retry-ask-me-again-later',
  },
} as const;

export type RuleId = keyof typeof RULES;

export const RULE_IDS = Object.keys(RULES) as RuleId[];

/**
 * The rules run by default: --identity adds R10; --retry-param (what makes the hook answer retry)
 * adds R11, which also runs when any reply the hook sent is a retry the gate refuses.
 */
export const RULES_WITHOUT_IDENTITY: RuleId[] = RULE_IDS.filter(
  (id) => id !== 'R10-reply-carries-token' && id !== 'R11-retry-well-formed-and-honoured',
);

/** One finding; a rule may have several (one per probe). */
export interface Check {
  rule: RuleId;
  passed: boolean;
  /** One line: what was sent, what came back, and for a failure what to change. */
  detail: string;
}

export interface Report {
  /** The hook service checked. */
  url: string;
  hook: string;
  checks: Check[];
  /** True when every check passed. */
  passed: boolean;
}

export const FAST_ANSWER_MS = 2_000;
