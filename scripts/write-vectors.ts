// Writes the test vectors into schemas/vectors/: `node --import tsx scripts/write-vectors.ts`.
// Every message is spelt out here by hand, and correlation ids are computed with node:crypto
// directly from the documented algorithm, not with KeyRing: the vectors check the
// implementation instead of echoing it. Review the diff before committing regenerated files.
import { createHmac } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The KeyRing of every vector: [PRIMARY, PREVIOUS]. FOREIGN belongs to nobody. */
const PRIMARY_KEY = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
const PREVIOUS_KEY = 'a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf';
const FOREIGN_KEY = 'ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100';

/** Where the vectors live, beside the contract they test. */
const here = join(dirname(fileURLToPath(import.meta.url)), '..', 'schemas', 'vectors');

interface Ref {
  namespace: string;
  revision: string;
  revisionUID: string;
  runUID: string;
  hook: string;
  attempt: number;
}

function mint(keyHex: string, ref: Ref): string {
  const payload = Buffer.from(JSON.stringify(ref)).toString('base64url');
  const mac = createHmac('sha256', Buffer.from(keyHex, 'hex')).update(`prestart.dev/correlationid/v2:${payload}`).digest('base64url');
  return `${payload}.${mac}`;
}

const REF: Ref = {
  namespace: 'shop',
  revision: 'checkout-00002',
  revisionUID: '5b7c3a1e-9f0d-4c2b-8e61-0a4d2f3b7c9e',
  runUID: '9d4e2b71-6c3a-4f8e-b5d0-7a1c3e9f2b64',
  hook: 'db-migrate',
  attempt: 1,
};
const CORRELATION_ID = mint(PRIMARY_KEY, REF);
const GATE = '/apis/prestart.dev/v1alpha1/namespaces/shop/gate';
const HOOK_SOURCE = '/apis/serving.knative.dev/v1/namespaces/shop/services/db-migrate-hook';
const TIME = '2025-06-01T12:00:00.000Z';
const DEADLINE = '2025-06-01T12:10:00.000Z';
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
/** The dataschema of a protocol version 2 request (requested.data.schema.json's $id). */
const DATASCHEMA_V2 = 'https://prestart.dev/schemas/v1alpha1/requested.data.v2.schema.json';
const APP_DIGEST = 'registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae';
const MIGRATE_DIGEST = 'registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9';
// The three kinds of container a hook meets: one Knative resolved, one on a registry it does not
// resolve (no digest: it runs the image as written) and a resolved init container.
const CONTAINERS = [
  { name: 'user-container', image: 'registry.example/shop/checkout:v2', digest: APP_DIGEST },
  { name: 'cache-warmer', image: 'kind.local/shop/cache-warmer:dev' },
  { name: 'migrate', image: 'registry.example/shop/migrate:v2', digest: MIGRATE_DIGEST, init: true },
];

const START_DATA = {
  action: 'start',
  revision: {
    namespace: 'shop',
    name: 'checkout-00002',
    uid: REF.revisionUID,
    service: 'checkout',
    configuration: 'checkout',
    labels: {
      'serving.knative.dev/service': 'checkout',
      'serving.knative.dev/configuration': 'checkout',
      'prestart.dev/hold': 'true',
    },
    annotations: { 'prestart.dev/hooks': '["db-migrate"]' },
    // For version 1 hooks: what each (non-init) container runs.
    images: [APP_DIGEST, 'kind.local/shop/cache-warmer:dev'],
    containers: CONTAINERS,
  },
  hook: { name: 'db-migrate', params: { database: 'orders', dryRun: false } },
  attempt: 1,
  deadline: DEADLINE,
  contributions: { allowed: ['env', 'volume'] },
};

/** The start request's data with the first container's digest replaced (the invalid-digest vectors). */
const withFirstDigest = (digest: string): string =>
  JSON.stringify({
    ...START_DATA,
    revision: { ...START_DATA.revision, containers: [{ ...CONTAINERS[0], digest }, ...CONTAINERS.slice(1)] },
  });
const { containers: _, ...REVISION_WITHOUT_CONTAINERS } = START_DATA.revision;
/** A start from a version 1 gate: no containers (and images as written in the spec). */
const START_DATA_V1 = {
  ...START_DATA,
  revision: { ...REVISION_WITHOUT_CONTAINERS, images: ['registry.example/shop/checkout:v2', 'kind.local/shop/cache-warmer:dev'] },
};
// A cancel may leave containers out: it only names the attempt to stop.
const CANCEL_DATA = {
  action: 'cancel',
  reason: 'Revision shop/checkout-00002 was deleted',
  revision: REVISION_WITHOUT_CONTAINERS,
  hook: START_DATA.hook,
  attempt: 1,
  contributions: START_DATA.contributions,
};

function requestHeaders(overrides: Record<string, string | undefined> = {}): Record<string, string> {
  return clean({
    'content-type': 'application/json',
    'ce-specversion': '1.0',
    'ce-id': `${REF.runUID}/db-migrate/1`,
    'ce-source': GATE,
    'ce-type': 'revision.prestart.requested',
    'ce-subject': 'shop/checkout-00002',
    'ce-time': TIME,
    'ce-dataschema': DATASCHEMA_V2,
    'ce-prestarthook': 'db-migrate',
    'ce-correlationid': CORRELATION_ID,
    'ce-prestartattempt': '1',
    ...overrides,
  });
}

function completedHeaders(overrides: Record<string, string | undefined> = {}): Record<string, string> {
  return clean({
    'content-type': 'application/json',
    'ce-specversion': '1.0',
    'ce-id': '0f8fad5b-d9cb-469f-a165-70867728950e',
    'ce-source': HOOK_SOURCE,
    'ce-type': 'revision.prestart.completed',
    'ce-subject': 'shop/checkout-00002',
    'ce-time': TIME,
    'ce-replyid': CORRELATION_ID,
    'ce-prestarthook': 'db-migrate',
    'ce-prestartattempt': '1',
    ...overrides,
  });
}

function structuredCompleted(overrides: Record<string, unknown>, data: unknown): string {
  return JSON.stringify(
    clean({
      specversion: '1.0',
      id: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
      source: HOOK_SOURCE,
      type: 'revision.prestart.completed',
      subject: 'shop/checkout-00002',
      time: TIME,
      datacontenttype: 'application/json',
      replyid: CORRELATION_ID,
      prestarthook: 'db-migrate',
      prestartattempt: 1,
      ...overrides,
      data,
    }),
  );
}

function clean<T>(record: Record<string, T | undefined>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as Record<string, T>;
}

const STRUCTURED = { 'content-type': 'application/cloudevents+json; charset=utf-8' };

function reply(outcome: string, extra: Record<string, unknown>, eventKey: string): Record<string, unknown> {
  return {
    namespace: REF.namespace,
    revision: REF.revision,
    revisionUID: REF.revisionUID,
    runUID: REF.runUID,
    hook: REF.hook,
    attempt: REF.attempt,
    outcome,
    ...extra,
    eventKey,
  };
}
const BINARY_KEY = `${HOOK_SOURCE}#0f8fad5b-d9cb-469f-a165-70867728950e`;
const STRUCTURED_KEY = `${HOOK_SOURCE}#7c9e6679-7425-40de-944b-e07fc1f90ae7`;

interface Vector {
  description: string;
  mode: 'binary' | 'structured';
  headers: Record<string, string>;
  body: string;
  maxBytes?: number;
  expect: { ok: true; reply?: Record<string, unknown> } | { ok: false; code: string };
}

const ENV_CONTRIBUTION = { name: 'orders-db', secretName: 'orders-db-app', as: 'env', env: { DATABASE_URL: 'uri' } };

const vectors: Record<string, Record<string, Vector>> = {
  'requested/valid': {
    'start-binary': {
      description: 'A start request as the gate sends it over HTTP in binary mode.',
      mode: 'binary',
      headers: requestHeaders({ 'ce-traceparent': TRACEPARENT }),
      body: JSON.stringify(START_DATA),
      expect: { ok: true },
    },
    'start-structured': {
      description: 'The same start request in structured mode; prestartattempt is a JSON number.',
      mode: 'structured',
      headers: STRUCTURED,
      body: JSON.stringify({
        specversion: '1.0',
        id: `${REF.runUID}/db-migrate/1`,
        source: GATE,
        type: 'revision.prestart.requested',
        subject: 'shop/checkout-00002',
        time: TIME,
        datacontenttype: 'application/json',
        dataschema: DATASCHEMA_V2,
        prestarthook: 'db-migrate',
        correlationid: CORRELATION_ID,
        prestartattempt: 1,
        data: START_DATA,
      }),
      expect: { ok: true },
    },
    'cancel-binary': {
      description:
        'A cancel: same type, data.action "cancel" with a reason, its own id, no deadline; revision.containers may be left out of a cancel.',
      mode: 'binary',
      headers: requestHeaders({ 'ce-id': `${REF.runUID}/db-migrate/1/cancel` }),
      body: JSON.stringify(CANCEL_DATA),
      expect: { ok: true },
    },
    'start-through-broker': {
      description:
        'A start request as a Knative Broker delivers it: header names in any case, plus ce-knativearrivaltime, ce-knativebrokerttl, traceparent and Prefer: reply.',
      mode: 'binary',
      headers: {
        'Content-Type': 'application/json',
        'Ce-Specversion': '1.0',
        'Ce-Id': `${REF.runUID}/db-migrate/1`,
        'Ce-Source': GATE,
        'Ce-Type': 'revision.prestart.requested',
        'Ce-Subject': 'shop/checkout-00002',
        'Ce-Time': TIME,
        'Ce-Dataschema': DATASCHEMA_V2,
        'Ce-Prestarthook': 'db-migrate',
        'Ce-Correlationid': CORRELATION_ID,
        'Ce-Prestartattempt': '1',
        'Ce-Knativearrivaltime': '2025-06-01T12:00:00.123456789Z',
        'Ce-Knativebrokerttl': '255',
        Traceparent: TRACEPARENT,
        Prefer: 'reply',
      },
      body: JSON.stringify(START_DATA),
      expect: { ok: true },
    },
    'start-v1': {
      description:
        'A start from a version 1 gate: no ce-dataschema and no revision.containers. Hooks must still take it; what will run is then unknown (images may hold tags).',
      mode: 'binary',
      headers: requestHeaders({ 'ce-dataschema': undefined }),
      body: JSON.stringify(START_DATA_V1),
      expect: { ok: true },
    },
    'start-unknown-members': {
      description:
        'A version 2 start with members this version does not define, at the top, in revision and in a container: a newer gate may add them, so hooks ignore them.',
      mode: 'binary',
      headers: requestHeaders(),
      body: JSON.stringify({
        ...START_DATA,
        revision: {
          ...START_DATA.revision,
          containers: [{ ...CONTAINERS[0], platform: 'linux/amd64' }, ...CONTAINERS.slice(1)],
          generation: 2,
        },
        priority: 'high',
      }),
      expect: { ok: true },
    },
  },
  'requested/invalid': {
    'start-without-containers': {
      description:
        'A version 2 start (ce-dataschema names version 2) must name its containers: without them a hook cannot know what will run.',
      mode: 'binary',
      headers: requestHeaders(),
      body: JSON.stringify(START_DATA_V1),
      expect: { ok: false, code: 'invalid-data' },
    },
    'malformed-digest': {
      description: 'A digest must be a digest reference, repository@sha256:<64 lowercase hex digits>; here a sha256 cut short.',
      mode: 'binary',
      headers: requestHeaders(),
      body: withFirstDigest('registry.example/shop/checkout@sha256:2c26b46b68ffc68f'),
      expect: { ok: false, code: 'invalid-data' },
    },
    'digest-is-a-tag': {
      description: 'A digest is never a tag: a tag can move between the scan and the run.',
      mode: 'binary',
      headers: requestHeaders(),
      body: withFirstDigest('registry.example/shop/checkout:v2'),
      expect: { ok: false, code: 'invalid-data' },
    },
    'cancel-without-reason': {
      description: 'action "cancel" needs a reason.',
      mode: 'binary',
      headers: requestHeaders({ 'ce-id': `${REF.runUID}/db-migrate/1/cancel` }),
      body: JSON.stringify({ ...CANCEL_DATA, reason: undefined }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'start-without-deadline': {
      description: 'action "start" needs a deadline.',
      mode: 'binary',
      headers: requestHeaders(),
      body: JSON.stringify({ ...START_DATA, deadline: undefined }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'missing-correlationid': {
      description: 'A request without correlationid could never be answered.',
      mode: 'binary',
      headers: requestHeaders({ 'ce-correlationid': undefined }),
      body: JSON.stringify(START_DATA),
      expect: { ok: false, code: 'malformed' },
    },
    'hook-mismatch': {
      description: 'prestarthook must name the same hook as data.hook.name.',
      mode: 'binary',
      headers: requestHeaders({ 'ce-prestarthook': 'cache-warmup' }),
      body: JSON.stringify(START_DATA),
      expect: { ok: false, code: 'hook-mismatch' },
    },
  },
  'completed/valid': {
    'succeeded-binary': {
      description: 'A success with an env contribution, binary mode.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'succeeded', message: 'migrated to v42', contributions: [ENV_CONTRIBUTION] }),
      expect: {
        ok: true,
        reply: reply('succeeded', { message: 'migrated to v42', contributions: [ENV_CONTRIBUTION] }, BINARY_KEY),
      },
    },
    'succeeded-structured': {
      description: 'A success with volume and envFrom contributions, structured mode.',
      mode: 'structured',
      headers: STRUCTURED,
      body: structuredCompleted(
        {},
        {
          outcome: 'succeeded',
          contributions: [
            { name: 'orders-db', secretName: 'orders-db-app', as: 'volume' },
            { name: 'orders-db-env', secretName: 'orders-db-app', as: 'envFrom' },
          ],
        },
      ),
      expect: {
        ok: true,
        reply: reply(
          'succeeded',
          {
            contributions: [
              { name: 'orders-db', secretName: 'orders-db-app', as: 'volume' },
              { name: 'orders-db-env', secretName: 'orders-db-app', as: 'envFrom' },
            ],
          },
          STRUCTURED_KEY,
        ),
      },
    },
    details: {
      description:
        'A failure with a details link (optional, added compatibly: where a person finds more, a URL or a command). Shown by kn prestart get/why, in the run and in Events.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'failed', message: 'migration failed', details: 'kubectl logs job/migrate-checkout-00002 -n shop' }),
      expect: {
        ok: true,
        reply: reply('failed', { message: 'migration failed', details: 'kubectl logs job/migrate-checkout-00002 -n shop' }, BINARY_KEY),
      },
    },
    'failed-structured': {
      description: 'A failure with a message, structured mode.',
      mode: 'structured',
      headers: STRUCTURED,
      body: structuredCompleted({}, { outcome: 'failed', message: 'migration 0042 failed: column "total" exists' }),
      expect: {
        ok: true,
        reply: reply('failed', { message: 'migration 0042 failed: column "total" exists' }, STRUCTURED_KEY),
      },
    },
    'progress-through-broker': {
      description:
        'A progress report as a Broker Trigger delivers it to the gate sink: mixed-case headers and the attributes and headers Knative adds.',
      mode: 'binary',
      headers: {
        'Content-Type': 'application/json',
        'Ce-Specversion': '1.0',
        'Ce-Id': '0f8fad5b-d9cb-469f-a165-70867728950e',
        'Ce-Source': HOOK_SOURCE,
        'Ce-Type': 'revision.prestart.completed',
        'Ce-Subject': 'shop/checkout-00002',
        'Ce-Time': TIME,
        'Ce-Replyid': CORRELATION_ID,
        'Ce-Prestarthook': 'db-migrate',
        'Ce-Prestartattempt': '1',
        'Ce-Knativearrivaltime': '2025-06-01T12:00:01.5Z',
        'Ce-Knativebrokerttl': '254',
        'Ce-Ttl': '254',
        'Ce-Traceparent': TRACEPARENT,
        Traceparent: TRACEPARENT,
        Prefer: 'reply',
        'Kn-Namespace': 'shop',
      },
      body: JSON.stringify({ outcome: 'progress', message: 'applied 3 of 7 migrations', progress: 42 }),
      expect: {
        ok: true,
        reply: reply('progress', { message: 'applied 3 of 7 migrations', progress: 42, traceparent: TRACEPARENT }, BINARY_KEY),
      },
    },
    retry: {
      description:
        'Ask me again in 40 s (outcome retry): retryAfter in whole seconds and the reason in message are required. The gate asks again as the next attempt, with the same deadline; the PrestartHook bounds the delay and the count (spec.retryAfter).',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'retry', retryAfter: 40, message: 'quota busy: 0 of 8 databases free' }),
      expect: {
        ok: true,
        reply: reply('retry', { message: 'quota busy: 0 of 8 databases free', retryAfter: 40 }, BINARY_KEY),
      },
    },
    'previous-key': {
      description: 'A replyid minted with the previous key (second in the KeyRing) still verifies after rotation.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-replyid': mint(PREVIOUS_KEY, REF) }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: true, reply: reply('succeeded', {}, BINARY_KEY) },
    },
    minimal: {
      description: 'Only what is required: no subject, time, prestarthook or prestartattempt; the reply identity comes from replyid.',
      mode: 'binary',
      headers: completedHeaders({
        'ce-subject': undefined,
        'ce-time': undefined,
        'ce-prestarthook': undefined,
        'ce-prestartattempt': undefined,
      }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: true, reply: reply('succeeded', {}, BINARY_KEY) },
    },
  },
  'completed/invalid': {
    'forged-replyid': {
      description: 'A well-formed replyid signed with a key the gate does not hold.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-replyid': mint(FOREIGN_KEY, REF) }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'bad-replyid' },
    },
    'tampered-replyid': {
      description: 'A genuine signature on a payload changed to name another Revision.',
      mode: 'binary',
      headers: completedHeaders({
        'ce-replyid': `${Buffer.from(JSON.stringify({ ...REF, revision: 'checkout-00003' })).toString('base64url')}.${CORRELATION_ID.split('.')[1]}`,
      }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'bad-replyid' },
    },
    'garbage-replyid': {
      description: 'A replyid that is not a correlation id at all.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-replyid': 'please-let-me-in' }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'bad-replyid' },
    },
    'missing-replyid': {
      description: 'A reply without replyid cannot be correlated.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-replyid': undefined }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'bad-replyid' },
    },
    'hook-mismatch': {
      description: 'prestarthook names another hook than the verified replyid.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-prestarthook': 'cache-warmup' }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'hook-mismatch' },
    },
    'attempt-mismatch': {
      description: 'prestartattempt differs from the attempt in the verified replyid.',
      mode: 'structured',
      headers: STRUCTURED,
      body: structuredCompleted({ prestartattempt: 2 }, { outcome: 'succeeded' }),
      expect: { ok: false, code: 'hook-mismatch' },
    },
    'wrong-type': {
      description: 'A request delivered to the gate sink.',
      mode: 'binary',
      headers: requestHeaders(),
      body: JSON.stringify(START_DATA),
      expect: { ok: false, code: 'wrong-type' },
    },
    'batch-mode': {
      description: 'Batch mode is not supported.',
      mode: 'structured',
      headers: { 'content-type': 'application/cloudevents-batch+json' },
      body: `[${structuredCompleted({}, { outcome: 'succeeded' })}]`,
      expect: { ok: false, code: 'unsupported-mode' },
    },
    'missing-id-binary': {
      description: 'No ce-id header (an SDK would silently invent one).',
      mode: 'binary',
      headers: completedHeaders({ 'ce-id': undefined }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'malformed' },
    },
    'missing-id-structured': {
      description: 'No id member in a structured event.',
      mode: 'structured',
      headers: STRUCTURED,
      body: structuredCompleted({ id: undefined }, { outcome: 'succeeded' }),
      expect: { ok: false, code: 'malformed' },
    },
    'missing-source': {
      description: 'No ce-source header.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-source': undefined }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'malformed' },
    },
    'specversion-0.3': {
      description: 'Only specversion 1.0 is accepted.',
      mode: 'binary',
      headers: completedHeaders({ 'ce-specversion': '0.3' }),
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'malformed' },
    },
    'body-not-json': {
      description: 'A JSON content type with a body that is not JSON.',
      mode: 'binary',
      headers: completedHeaders(),
      body: 'outcome=succeeded',
      expect: { ok: false, code: 'malformed' },
    },
    'structured-not-json': {
      description: 'A structured body that is not JSON.',
      mode: 'structured',
      headers: STRUCTURED,
      body: '<event/>',
      expect: { ok: false, code: 'malformed' },
    },
    'not-a-cloudevent': {
      description: 'Plain JSON with no ce-* headers: not a CloudEvent.',
      mode: 'binary',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ outcome: 'succeeded' }),
      expect: { ok: false, code: 'malformed' },
    },
    'text-data': {
      description: 'Data that is not JSON.',
      mode: 'binary',
      headers: completedHeaders({ 'content-type': 'text/plain' }),
      body: 'succeeded',
      expect: { ok: false, code: 'invalid-data' },
    },
    'unknown-outcome': {
      description: 'outcome must be succeeded, failed, retry or progress.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'done' }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'retry-without-delay': {
      description: 'A retry must say when to ask again: retryAfter (seconds) is required.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'retry', message: 'quota busy' }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'retry-without-reason': {
      description: 'A retry must say why: a non-empty message is required.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'retry', retryAfter: 40, message: '' }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'retry-delay-zero': {
      description: 'retryAfter is a whole number of seconds from 1 to 86400: 0 would be a busy loop.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'retry', retryAfter: 0, message: 'quota busy' }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'retry-delay-fraction': {
      description: 'retryAfter is a whole number of seconds.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'retry', retryAfter: 1.5, message: 'quota busy' }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'retry-after-on-success': {
      description: 'retryAfter only goes with outcome "retry".',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'succeeded', retryAfter: 40 }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'progress-over-100': {
      description: 'progress is a percentage.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'progress', progress: 101 }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'progress-fraction': {
      description: 'progress is an integer.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'progress', progress: 42.5 }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'message-too-long': {
      description: 'message is at most 4096 characters.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'failed', message: 'x'.repeat(4097) }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'details-multiline': {
      description: 'details is one line (no control characters) of at most 1024 characters.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'failed', message: 'x', details: 'kubectl logs job/a\nrm -rf /' }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'unknown-member': {
      description: 'Unknown data members are refused (a misspelt "contributions" must not be dropped silently).',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'succeeded', contribution: [ENV_CONTRIBUTION] }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'contributions-on-failure': {
      description: 'Contributions only come with outcome "succeeded".',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'failed', contributions: [ENV_CONTRIBUTION] }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'contribution-name-not-dns': {
      description: 'A contribution name must be a DNS-1123 label.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'succeeded', contributions: [{ ...ENV_CONTRIBUTION, name: 'Orders_DB' }] }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'env-without-map': {
      description: 'as "env" needs an env map {VARIABLE: secretKey}.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({
        outcome: 'succeeded',
        contributions: [{ name: 'orders-db', secretName: 'orders-db-app', as: 'env' }],
      }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'env-map-on-volume': {
      description: 'An env map only goes with as "env".',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'succeeded', contributions: [{ ...ENV_CONTRIBUTION, as: 'volume' }] }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'env-var-name-invalid': {
      description: 'Environment variable names are C identifiers.',
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'succeeded', contributions: [{ ...ENV_CONTRIBUTION, env: { 'DATABASE-URL': 'uri' } }] }),
      expect: { ok: false, code: 'invalid-data' },
    },
    'too-large': {
      description: "A body over the receiver's limit (maxBytes 1024 here; the gate defaults to 64 KiB).",
      mode: 'binary',
      headers: completedHeaders(),
      body: JSON.stringify({ outcome: 'failed', message: 'x'.repeat(2000) }),
      maxBytes: 1024,
      expect: { ok: false, code: 'too-large' },
    },
  },
};

for (const [folder, files] of Object.entries(vectors)) {
  const dir = join(here, folder);
  mkdirSync(dir, { recursive: true });
  for (const old of readdirSync(dir)) if (old.endsWith('.json')) rmSync(join(dir, old));
  for (const [name, vector] of Object.entries(files)) {
    writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(vector, null, 2)}\n`);
  }
}

writeFileSync(
  join(here, 'correlation.json'),
  `${JSON.stringify(
    {
      description:
        'correlationid = base64url(JSON ref) + "." + base64url(HMAC-SHA256(key, "prestart.dev/correlationid/v2:" + payload)); keys are hex. The request id is "<runUID>/<hook>/<attempt>".',
      keys: { primary: PRIMARY_KEY, previous: PREVIOUS_KEY, foreign: FOREIGN_KEY },
      ref: REF,
      primary: CORRELATION_ID,
      previous: mint(PREVIOUS_KEY, REF),
      foreign: mint(FOREIGN_KEY, REF),
    },
    null,
    2,
  )}\n`,
);
