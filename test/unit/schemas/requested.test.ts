import test from 'ava';
import { imagesToRun } from '../../../hooks/sdk/index.ts';
import {
  buildRequested,
  EXT_ATTEMPT,
  EXT_CORRELATION_ID,
  EXT_HOOK,
  KeyRing,
  parseRequested,
  REQUESTED_DATASCHEMA_V2,
  REQUESTED_TYPE,
  toBinary,
  toStructured,
} from '../../../schemas/index.ts';
import { deadline, hook, revision, runUID } from '../../support/fixtures.ts';
import { keys } from '../../support/keys.ts';

const DIGEST = 'registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae';
const MIGRATE_DIGEST = 'registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9';
/** What the run recorded: a resolved container, a resolved init container and one on a registry Knative skips. */
const containers = [
  { name: 'user-container', image: 'registry.example/shop/checkout:v2', digest: DIGEST },
  { name: 'migrate', image: 'registry.example/shop/migrate:v2', digest: MIGRATE_DIGEST, init: true },
  { name: 'sidecar', image: 'kind.local/shop/sidecar:dev' },
];

const start = () => buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', containers, keys });

test('a start request carries the attributes hooks and Trigger filters rely on', (t) => {
  const time = new Date('2025-06-01T12:00:00Z');
  const event = buildRequested({
    revision,
    runUID,
    hook,
    attempt: 2,
    deadline,
    action: 'start',
    containers,
    keys,
    time,
    traceparent: '00-abc-def-01',
  });
  t.like(event, {
    specversion: '1.0',
    id: `${runUID}/db-migrate/2`,
    source: '/apis/prestart.dev/v1alpha1/namespaces/shop/gate',
    type: REQUESTED_TYPE,
    subject: 'shop/checkout-00002',
    time: '2025-06-01T12:00:00.000Z',
    datacontenttype: 'application/json',
    dataschema: REQUESTED_DATASCHEMA_V2,
    [EXT_HOOK]: 'db-migrate',
    [EXT_ATTEMPT]: 2,
    traceparent: '00-abc-def-01',
  });
  t.deepEqual(keys.verify(event[EXT_CORRELATION_ID]), {
    namespace: 'shop',
    revision: 'checkout-00002',
    revisionUID: revision.uid,
    runUID,
    hook: 'db-migrate',
    attempt: 2,
  });
  t.false('traceparent' in start());
});

test('the data describes the Revision, the hook and what it may contribute', (t) => {
  t.deepEqual(start().data, {
    action: 'start',
    revision: {
      namespace: 'shop',
      name: 'checkout-00002',
      uid: revision.uid,
      service: 'checkout',
      configuration: 'checkout',
      labels: revision.labels,
      annotations: revision.annotations,
      images: [DIGEST, 'kind.local/shop/sidecar:dev'],
      containers,
    },
    hook: { name: 'db-migrate', params: { database: 'orders' } },
    attempt: 1,
    deadline,
    contributions: { allowed: ['env', 'volume'] },
  });
});

test('a resend has the same id and correlationid, so hooks can dedupe it', (t) => {
  const first = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', containers, keys, time: new Date(1) });
  const resend = buildRequested({
    revision,
    runUID,
    hook,
    attempt: 1,
    deadline,
    action: 'start',
    containers,
    keys,
    time: new Date(60_000),
  });
  t.is(resend.id, first.id);
  t.is(resend[EXT_CORRELATION_ID], first[EXT_CORRELATION_ID]);
  t.not(resend.time, first.time);
  const retry = buildRequested({ revision, runUID, hook, attempt: 2, deadline, action: 'start', containers, keys });
  t.not(retry.id, first.id);
});

test('a cancel is a request with action "cancel", a reason and its own id', (t) => {
  const event = buildRequested({ revision, runUID, hook, attempt: 1, action: 'cancel', reason: 'Revision deleted', keys });
  t.is(event.type, REQUESTED_TYPE);
  t.is(event.id, `${runUID}/db-migrate/1/cancel`);
  t.like(event.data, { action: 'cancel', reason: 'Revision deleted', attempt: 1 });
  t.false('deadline' in (event.data as object));
  t.is(event[EXT_CORRELATION_ID], start()[EXT_CORRELATION_ID]);
});

test('source and replyTo can be configured; params default to {}', (t) => {
  const event = buildRequested({
    revision,
    runUID,
    hook: { ...hook, params: undefined },
    attempt: 1,
    deadline: new Date(deadline),
    action: 'start',
    containers,
    keys,
    source: 'https://gate.example/prestart',
    replyTo: 'https://gate.example/replies',
  });
  t.is(event.source, 'https://gate.example/prestart');
  t.like(event.data, { replyTo: 'https://gate.example/replies', deadline, hook: { name: 'db-migrate', params: {} } });
});

test('a request that would break the schema is a bug and throws', (t) => {
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, action: 'cancel', keys }), {
    message: 'buildRequested: data: action "cancel" needs a reason',
  });
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, action: 'start', containers, keys }), {
    message: /needs a deadline/,
  });
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, deadline: 'soon', action: 'start', containers, keys }), {
    message: /data\/deadline must match format "date-time"/,
  });
  t.throws(
    () => buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', containers, keys, replyTo: 'not a uri' }),
    {
      message: /data\/replyTo/,
    },
  );
  t.throws(
    () => buildRequested({ revision, runUID, hook: { ...hook, name: 'DB' }, attempt: 1, deadline, action: 'start', containers, keys }),
    {
      message: /data\/hook\/name must be a DNS-1123 subdomain/,
    },
  );
});

test("the event does not share state with the caller's Revision", (t) => {
  const labels = { app: 'checkout' };
  const event = buildRequested({
    revision: { ...revision, labels },
    hook,
    runUID,
    attempt: 1,
    deadline,
    action: 'start',
    containers,
    keys,
  });
  labels.app = 'changed';
  t.like(event.data, { revision: { labels: { app: 'checkout' } } });
});

test('a hook reads the request back from either mode', (t) => {
  const event = start();
  for (const message of [toBinary(event), toStructured(event)]) {
    const result = parseRequested(message);
    t.true(result.ok);
    if (!result.ok) continue;
    t.deepEqual(result.request.data, event.data);
    t.like(result.request, {
      correlationid: event[EXT_CORRELATION_ID],
      hook: 'db-migrate',
      attempt: 1,
      subject: 'shop/checkout-00002',
      key: `${event.source}#${event.id}`,
    });
  }
});

test('a request with Revision annotations near the Kubernetes limit fits the default bound', (t) => {
  const annotations = { big: 'x'.repeat(250 * 1024) };
  const event = buildRequested({
    revision: { ...revision, annotations },
    runUID,
    hook,
    attempt: 1,
    deadline,
    action: 'start',
    containers,
    keys,
  });
  t.true(parseRequested(toBinary(event)).ok);
  const small = parseRequested(toBinary(event), { maxBytes: 64 * 1024 });
  t.false(small.ok);
  if (!small.ok) t.is(small.error.code, 'too-large');
});

test('a hook does not need the key to read a request', (t) => {
  const other = new KeyRing([KeyRing.generateKey()]);
  const event = buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', containers, keys: other });
  t.true(parseRequested(toBinary(event)).ok);
});

test('parseRequested refuses a reply and an attempt that contradicts the data', (t) => {
  const event = start();
  const reply = parseRequested(toBinary({ ...event, type: 'revision.prestart.completed' }));
  t.false(reply.ok);
  if (!reply.ok) t.is(reply.error.code, 'wrong-type');
  const attempt = parseRequested(toBinary({ ...event, [EXT_ATTEMPT]: 5 }));
  t.false(attempt.ok);
  if (!attempt.ok) t.is(attempt.error.reason, 'prestartattempt 5 differs from data.attempt 1');
});

test('newer gates may add data members without breaking older hooks', (t) => {
  const event = start();
  const result = parseRequested(toBinary({ ...event, data: { ...(event.data as object), futureField: { x: 1 } } }));
  t.true(result.ok);
});

test('a start names what will run (protocol version 2); the gate cannot send one without it', (t) => {
  t.throws(() => buildRequested({ revision, runUID, hook, attempt: 1, deadline, action: 'start', keys }), {
    message: /^buildRequested: action "start" needs containers \(protocol version 2/,
  });
  // A cancel only names the attempt: it may come without containers, and images stays as the Revision has it.
  const cancel = buildRequested({ revision, runUID, hook, attempt: 1, action: 'cancel', reason: 'Revision deleted', keys });
  t.false('containers' in (cancel.data as { revision: object }).revision);
  t.like(cancel.data, { revision: { images: revision.images } });
  t.is(cancel.dataschema, REQUESTED_DATASCHEMA_V2);
});

test('containers keep only what the schema knows: an empty digest is no digest, init only when true', (t) => {
  const event = buildRequested({
    revision,
    runUID,
    hook,
    attempt: 1,
    deadline,
    action: 'start',
    containers: [
      { name: 'user-container', image: 'kind.local/app:dev', digest: '', init: false },
      { name: 'copy', image: 'busybox', digest: `index.docker.io/library/busybox@sha512:${'ab'.repeat(64)}`, init: true },
    ],
    keys,
  });
  t.deepEqual((event.data as { revision: { containers: unknown } }).revision.containers, [
    { name: 'user-container', image: 'kind.local/app:dev' },
    { name: 'copy', image: 'busybox', digest: `index.docker.io/library/busybox@sha512:${'ab'.repeat(64)}`, init: true },
  ]);
  t.throws(
    () =>
      buildRequested({
        revision,
        runUID,
        hook,
        attempt: 1,
        deadline,
        action: 'start',
        containers: [{ name: 'user-container', image: 'app:v1', digest: 'app@sha256:abc' }],
        keys,
      }),
    { message: 'buildRequested: data/revision/containers/0/digest must be a digest reference (repository@sha256:<64 hex digits>)' },
  );
});

test('a hook reads the containers typed, and imagesToRun gives what to scan or run: the digest, else the image', (t) => {
  const result = parseRequested(toBinary(start()));
  if (!result.ok) return t.fail(result.error.reason);
  t.is(result.request.version, 2);
  t.deepEqual(result.request.data.revision.containers, containers);
  t.deepEqual(imagesToRun(result.request), {
    'user-container': DIGEST,
    migrate: MIGRATE_DIGEST,
    sidecar: 'kind.local/shop/sidecar:dev',
  });
});

test('a request from a version 1 gate (no dataschema, no containers) still parses, as version 1', (t) => {
  const { dataschema: _, ...event } = start();
  const data = structuredClone(event.data) as { revision: { containers?: unknown } };
  delete data.revision.containers;
  const v1 = parseRequested(toBinary({ ...event, data }));
  if (!v1.ok) return t.fail(v1.error.reason);
  t.is(v1.request.version, 1);
  t.is(v1.request.data.revision.containers, undefined);
  t.is(imagesToRun(v1.request), undefined, 'a version 1 request does not say what will run');
  // The same data marked version 2 is refused: a version 2 start always names its containers.
  const v2 = parseRequested(toBinary({ ...event, dataschema: REQUESTED_DATASCHEMA_V2, data }));
  t.false(v2.ok);
  if (!v2.ok) {
    t.is(v2.error.code, 'invalid-data');
    t.regex(v2.error.reason, /action "start" needs containers/);
  }
});

test('an unknown (newer) dataschema is read with the newest rules this code knows', (t) => {
  const event = start();
  const newer = parseRequested(toBinary({ ...event, dataschema: 'https://prestart.dev/schemas/v1alpha1/requested.data.v3.schema.json' }));
  t.true(newer.ok);
  if (newer.ok) t.is(newer.request.version, 2);
});

test('a malformed digest is refused', (t) => {
  const event = start();
  for (const digest of [
    'registry.example/shop/checkout:v2',
    'registry.example/shop/checkout@sha256:2c26b46b',
    `@sha256:${'a'.repeat(64)}`,
  ]) {
    const data = structuredClone(event.data) as { revision: { containers: { digest?: string }[] } };
    (data.revision.containers[0] as { digest?: string }).digest = digest;
    const result = parseRequested(toBinary({ ...event, data }));
    t.false(result.ok, digest);
    if (!result.ok)
      t.is(result.error.reason, 'data/revision/containers/0/digest must be a digest reference (repository@sha256:<64 hex digits>)');
  }
});
