// The conformance checker: plays the gate against a running hook service.

export { type ReceivedReply, type ReplySink, readReply, startReplySink } from './reply-sink.ts';
export { failuresOf, formatReport } from './report.ts';
export { type Check, FAST_ANSWER_MS, type Report, RULE_IDS, RULES, RULES_WITHOUT_IDENTITY, type RuleId } from './rules.ts';
export { type ConformanceOptions, DEFAULT_CONFORMANCE_HOOK, runConformance } from './run.ts';
