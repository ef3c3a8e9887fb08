// The data schemas as TypeScript types plus validators compiled once: every event a sink
// receives goes through these, so compiling per call would be the hot path's main cost.
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import type { ContainerImage, Contribution, ContributionKind, Reply } from '../api/types.ts';
import { REQUESTED_DATASCHEMA_V1, type RequestedVersion } from './attributes.ts';
import completedSchema from './completed.data.schema.json' with { type: 'json' };
import type { RequestAction } from './correlation.ts';
import requestedSchema from './requested.data.schema.json' with { type: 'json' };

export interface RequestedRevision {
  namespace: string;
  name: string;
  uid: string;
  service?: string;
  configuration?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** For version 1 hooks: what each container (not init containers) runs, the digest when Knative resolved one. */
  images: string[];
  /**
   * Version 2: every container with the digest Knative resolved (api/types.ts ContainerImage).
   * Always present in a version 2 start; absent in a request from a version 1 gate, and may be
   * absent in a cancel.
   */
  containers?: RequestedContainer[];
}

/** One container of revision.containers: scan or run `digest` when set, else `image`. */
export type RequestedContainer = ContainerImage;

/** data of a revision.prestart.requested event (requested.data.schema.json). */
export interface RequestedData {
  action: RequestAction;
  /** action=cancel only. */
  reason?: string;
  revision: RequestedRevision;
  hook: { name: string; params: Record<string, unknown> };
  attempt: number;
  /** RFC 3339; always present for action=start. */
  deadline?: string;
  replyTo?: string;
  contributions: { allowed: ContributionKind[] };
}

export type Outcome = Reply['outcome'];

/** data of a revision.prestart.completed event (completed.data.schema.json). */
export interface CompletedData {
  outcome: Outcome;
  message?: string;
  /** Where a person finds more: a URL or a command (one line). */
  details?: string;
  progress?: number;
  /** outcome=retry only (and required with it): seconds until the gate should ask again. */
  retryAfter?: number;
  /** outcome=succeeded only. */
  contributions?: Contribution[];
}

export { completedSchema, requestedSchema };

// strictRequired is off because the if/then rules name members declared in the outer schema.
const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: false });
ajvFormats.default(ajv, ['date-time', 'uri']);

const validateRequestedData: ValidateFunction<RequestedData> = ajv.compile<RequestedData>(requestedSchema);
// Version 1 is version 2 without the rule that a start names its containers (the schema's last
// allOf entry): a hook keeps taking requests from a gate that predates them.
const V2_ONLY_RULE = requestedSchema.allOf.length - 1;
const validateRequestedDataV1: ValidateFunction<RequestedData> = ajv.compile<RequestedData>({
  ...requestedSchema,
  $id: REQUESTED_DATASCHEMA_V1,
  title: 'revision.prestart.requested data, protocol version 1',
  allOf: requestedSchema.allOf.filter((_, i) => i !== V2_ONLY_RULE),
});
const validateCompletedData: ValidateFunction<CompletedData> = ajv.compile<CompletedData>(completedSchema);

export type DataCheck<T> = { ok: true; data: T } | { ok: false; reason: string };

/** `version`: which rules apply; 2 (the default) is what this gate sends, 1 what an older gate sent. */
export function checkRequestedData(data: unknown, version: RequestedVersion = 2): DataCheck<RequestedData> {
  const validate = version === 1 ? validateRequestedDataV1 : validateRequestedData;
  return validate(data) ? { ok: true, data } : { ok: false, reason: describe(validate.errors, REQUESTED_RULES) };
}

export function checkCompletedData(data: unknown): DataCheck<CompletedData> {
  return validateCompletedData(data) ? { ok: true, data } : { ok: false, reason: describe(validateCompletedData.errors, COMPLETED_RULES) };
}

// The schemas' conditional rules, in words: ajv would only say "must have required property"
// without the condition that made it required.
const REQUESTED_RULES: Record<string, string> = {
  '#/allOf/0/then/required': 'data: action "cancel" needs a reason',
  '#/allOf/1/then/required': 'data: action "start" needs a deadline',
  '#/allOf/2/then/properties/revision/required':
    'data/revision: action "start" needs containers (protocol version 2: each container with the digest Knative resolved)',
};
const COMPLETED_RULES: Record<string, string> = {
  '#/then/properties/contributions/maxItems': 'data/contributions: contributions are only allowed with outcome "succeeded"',
  '#/allOf/0/then/required':
    'data: outcome "retry" needs retryAfter (seconds until the gate asks again, 1 to 86400) and a message (the reason)',
  '#/allOf/0/then/properties/message/minLength': 'data/message: outcome "retry" needs a reason in message',
  '#/allOf/0/else/properties/retryAfter/false schema': 'data/retryAfter is only allowed with outcome "retry"',
  '#/$defs/contribution/then/required': '{path}: a contribution with as "env" needs an env map {VARIABLE: secretKey}',
  '#/$defs/contribution/else/properties/env/false schema': '{path}: env is only allowed when as is "env"',
};

const PATTERNS: Record<string, string> = {
  '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$': 'a DNS-1123 label (lowercase letters, digits and "-", starting and ending alphanumeric)',
  '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$': 'a DNS-1123 subdomain (lowercase letters, digits, "-" and ".")',
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$':
    'a DNS-1123 subdomain (lowercase letters, digits, "-" and "."), or <namespace>/<name> for a NamespacedPrestartHook',
  '^[A-Za-z_][A-Za-z0-9_]*$': 'an environment variable name (letters, digits and "_", not starting with a digit)',
  '^[-._a-zA-Z0-9]+$': 'a Secret key (letters, digits, "-", "_" and ".")',
  '^[^@\\s]+@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$': 'a digest reference (repository@sha256:<64 hex digits>)',
  '@sha256:[a-f0-9]{64}$': 'a digest reference (repository@sha256:<64 hex digits>)',
};

/** One human line for the first schema violation, e.g. `data/progress must be <= 100`. */
function describe(errors: ErrorObject[] | null | undefined, rules: Record<string, string>): string {
  const error = errors?.[0];
  if (!error) return 'data is invalid';
  const path = `data${error.instancePath}`;
  const rule = rules[error.schemaPath];
  if (rule) return rule.replace('{path}', path);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${path} is missing "${String(params.missingProperty)}"`;
    case 'additionalProperties':
      return `${path} has an unknown member "${String(params.additionalProperty)}"`;
    case 'enum':
      return `${path} must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'pattern': {
      const pattern = String(params.pattern);
      const what = PATTERNS[pattern] ?? `a string matching ${pattern}`;
      // propertyNames errors point at the object, and name the offending key.
      const name = error.propertyName === undefined ? '' : ` (key "${error.propertyName}")`;
      return `${path}${name} must be ${what}`;
    }
    case 'propertyNames':
      return `${path} has an invalid key "${String(params.propertyName)}"`;
    case 'false schema':
      return `${path} is not allowed here`;
    default:
      return `${path} ${error.message ?? 'is invalid'}`;
  }
}
