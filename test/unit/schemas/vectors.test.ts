// Every vector under schemas/vectors/ is checked here, the way a hook SDK in another language
// would check them.
import { readdirSync, readFileSync } from 'node:fs';
import test from 'ava';
import type { ContainerImage } from '../../../api/types.ts';
import type { ContractErrorCode } from '../../../schemas/index.ts';
import { buildRequested, KeyRing, parseCompleted, parseRequested, toBinary } from '../../../schemas/index.ts';

interface Vector {
  description: string;
  mode: 'binary' | 'structured';
  headers: Record<string, string>;
  body: string;
  maxBytes?: number;
  expect: { ok: true; reply?: Record<string, unknown> } | { ok: false; code: ContractErrorCode };
}

const root = new URL('../../../schemas/vectors/', import.meta.url);
const correlation = JSON.parse(readFileSync(new URL('correlation.json', root), 'utf8')) as {
  keys: { primary: string; previous: string };
  ref: { runUID: string };
};
const keys = KeyRing.fromHex(correlation.keys.primary, correlation.keys.previous);

function load(folder: string): Array<[string, Vector]> {
  const dir = new URL(`${folder}/`, root);
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => [`${folder}/${file}`, JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as Vector]);
}

const sets = {
  requestedValid: load('requested/valid'),
  requestedInvalid: load('requested/invalid'),
  completedValid: load('completed/valid'),
  completedInvalid: load('completed/invalid'),
};

test('every vector folder has vectors, and every vector declares its mode', (t) => {
  for (const [name, set] of Object.entries(sets)) t.true(set.length > 0, name);
  for (const [name, vector] of Object.values(sets).flat()) {
    t.true(vector.mode === 'binary' || vector.mode === 'structured', name);
    const structured = Object.entries(vector.headers).some(
      ([header, value]) => header.toLowerCase() === 'content-type' && value.startsWith('application/cloudevents'),
    );
    t.is(structured, vector.mode === 'structured', `${name}: mode does not match content-type`);
  }
});

for (const [name, vector] of [...sets.requestedValid, ...sets.requestedInvalid]) {
  test(`${name}: ${vector.description}`, (t) => {
    const result = parseRequested(
      { headers: vector.headers, body: vector.body },
      vector.maxBytes === undefined ? {} : { maxBytes: vector.maxBytes },
    );
    if (vector.expect.ok) {
      t.true(result.ok, result.ok ? '' : result.error.reason);
    } else {
      t.false(result.ok);
      if (!result.ok) t.is(result.error.code, vector.expect.code, result.error.reason);
    }
  });
}

for (const [name, vector] of [...sets.completedValid, ...sets.completedInvalid]) {
  test(`${name}: ${vector.description}`, (t) => {
    const result = parseCompleted(
      { headers: vector.headers, body: vector.body },
      vector.maxBytes === undefined ? { keys } : { keys, maxBytes: vector.maxBytes },
    );
    if (vector.expect.ok) {
      t.true(result.ok, result.ok ? '' : result.error.reason);
      if (result.ok && vector.expect.reply) t.deepEqual({ ...result.reply }, vector.expect.reply);
    } else {
      t.false(result.ok);
      if (!result.ok) {
        t.is(result.error.code, vector.expect.code, result.error.reason);
        t.true(result.error.status >= 400 && result.error.status < 500);
        t.notRegex(result.error.reason, /\n/);
      }
    }
  });
}

test('the gate builds exactly the start-binary vector from the same inputs', (t) => {
  const vector = JSON.parse(readFileSync(new URL('requested/valid/start-binary.json', root), 'utf8')) as Vector;
  const data = JSON.parse(vector.body) as {
    revision: {
      namespace: string;
      name: string;
      uid: string;
      service: string;
      configuration: string;
      labels: Record<string, string>;
      annotations: Record<string, string>;
      images: string[];
      containers: ContainerImage[];
    };
    hook: { name: string; params: Record<string, unknown> };
    deadline: string;
  };
  const event = buildRequested({
    revision: data.revision,
    hook: { name: data.hook.name, params: data.hook.params, allowedContributions: ['env', 'volume'] },
    runUID: correlation.ref.runUID,
    attempt: 1,
    deadline: data.deadline,
    action: 'start',
    containers: data.revision.containers,
    keys: KeyRing.fromHex(correlation.keys.primary),
    traceparent: vector.headers['ce-traceparent'],
    time: new Date(vector.headers['ce-time'] ?? ''),
  });
  const message = toBinary(event);
  t.deepEqual(message.headers, vector.headers);
  t.is(message.body, vector.body);
});
