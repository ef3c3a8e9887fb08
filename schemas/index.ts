// The CloudEvents contract between the gate and its hooks: import from here.
export {
  BATCH_CONTENT_TYPE,
  COMPLETED_TYPE,
  DEFAULT_MAX_REPLY_BYTES,
  DEFAULT_MAX_REQUEST_BYTES,
  EXT_ATTEMPT,
  EXT_CORRELATION_ID,
  EXT_HOOK,
  EXT_REPLY_ID,
  EXT_TRACEPARENT,
  eventKey,
  gateSource,
  JSON_CONTENT_TYPE,
  REQUESTED_DATASCHEMA_V1,
  REQUESTED_DATASCHEMA_V2,
  REQUESTED_TYPE,
  type RequestedVersion,
  revisionSubject,
  SPEC_VERSION,
  STRUCTURED_CONTENT_TYPE,
} from './attributes.ts';
export type {
  ContentMode,
  ContractError,
  ContractErrorCode,
  ParsedMessage,
  ParseOptions,
  ReceivedMessage,
} from './codec.ts';
export { contractError, parseMessage } from './codec.ts';
export type { BuildCompletedInput, CompletedResult, ParseCompletedOptions, RequestHandle } from './completed.ts';
export { buildCompleted, parseCompleted } from './completed.ts';
export type { CorrelationRef, RequestAction } from './correlation.ts';
export { KeyRing, keysFromHex, MAX_CORRELATION_ID_LENGTH, MIN_KEY_BYTES, requestId } from './correlation.ts';
export { toBinary, toStructured } from './encode.ts';
export type { BuildRequestedInput, ParsedRequest, RequestedResult } from './requested.ts';
export { buildRequested, parseRequested, referenceToRun, requestedVersion } from './requested.ts';
export type { CompletedData, DataCheck, Outcome, RequestedContainer, RequestedData, RequestedRevision } from './validate.ts';
export { checkCompletedData, checkRequestedData, completedSchema, requestedSchema } from './validate.ts';
