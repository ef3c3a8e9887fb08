import test from 'ava';
import { CloudEvent, HTTP } from 'cloudevents';
import type { CloudEventRecord } from '../../../schemas/event.ts';
import { parseMessage, toBinary, toStructured } from '../../../schemas/index.ts';

const limit = { maxBytes: 64 * 1024 };

const event: CloudEventRecord = {
  specversion: '1.0',
  id: 'uid-1/db-migrate/1',
  source: '/apis/prestart.dev/v1alpha1/namespaces/shop/gate',
  type: 'revision.prestart.requested',
  subject: 'shop/checkout-00002',
  time: '2025-06-01T12:00:00.000Z',
  datacontenttype: 'application/json',
  prestarthook: 'db-migrate',
  correlationid: 'abc.def',
  prestartattempt: 1,
  data: { action: 'start', nested: { list: [1, 2, 3] } },
};

function parsed(message: Parameters<typeof parseMessage>[0]): CloudEventRecord {
  const result = parseMessage(message, limit);
  if (!result.ok) throw new Error(result.error.reason);
  return result.event;
}

test('binary mode puts attributes in ce-* headers and data in the body', (t) => {
  const message = toBinary(event);
  t.is(message.headers['content-type'], 'application/json');
  t.is(message.headers['ce-id'], event.id);
  t.is(message.headers['ce-prestarthook'], 'db-migrate');
  t.is(message.headers['ce-prestartattempt'], '1');
  t.is(message.headers['ce-datacontenttype'], undefined);
  t.deepEqual(JSON.parse(String(message.body)), event.data);
});

test('binary mode round trip keeps every attribute (integers come back as strings, as headers are)', (t) => {
  const result = parseMessage(toBinary(event), limit);
  t.true(result.ok);
  if (!result.ok) return;
  t.is(result.mode, 'binary');
  t.deepEqual(result.event, { ...event, prestartattempt: '1' });
});

test('structured mode round trip keeps every attribute and type', (t) => {
  const message = toStructured(event);
  t.is(message.headers['content-type'], 'application/cloudevents+json; charset=utf-8');
  const result = parseMessage(message, limit);
  t.true(result.ok);
  if (!result.ok) return;
  t.is(result.mode, 'structured');
  t.deepEqual(result.event, event);
});

test('header names are matched in any case', (t) => {
  const { headers, body } = toBinary(event);
  const shouted = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
  t.deepEqual(parsed({ headers: shouted, body }), parsed({ headers, body }));
});

test('header values are percent-encoded on the way out and decoded on the way in', (t) => {
  const fancy = { ...event, subject: 'shop/caf\u00e9 "x" 100%', note: 'line\nbreak' };
  const message = toBinary(fancy);
  t.is(message.headers['ce-subject'], 'shop/caf%C3%A9%20%22x%22%20100%25');
  t.is(message.headers['ce-note'], 'line%0Abreak');
  const back = parsed(message);
  t.is(back.subject, fancy.subject);
  t.is(back.note, fancy.note);
});

test('a literal % from a sender that does not encode survives', (t) => {
  const { headers, body } = toBinary(event);
  t.is(parsed({ headers: { ...headers, 'ce-note': '100%' }, body }).note, '100%');
});

test('node http headers (arrays, Buffer body) are accepted', (t) => {
  const { headers, body } = toBinary(event);
  const nodeHeaders: Record<string, string | string[] | undefined> = { ...headers, 'x-forwarded-for': ['a', 'b'], absent: undefined };
  t.deepEqual(parsed({ headers: nodeHeaders, body: Buffer.from(String(body)) }).data, event.data);
});

test('an event from the CloudEvents SDK parses in both modes', (t) => {
  const sdkEvent = new CloudEvent({
    id: 'sdk-1',
    source: '/hooks/db',
    type: 'revision.prestart.completed',
    replyid: 'abc.def',
    prestartattempt: 2,
    data: { outcome: 'succeeded' },
  });
  for (const message of [HTTP.binary(sdkEvent), HTTP.structured(sdkEvent)]) {
    const back = parsed({ headers: message.headers as Record<string, string>, body: message.body as string });
    t.is(back.id, 'sdk-1');
    t.is(back.replyid, 'abc.def');
    t.is(Number(back.prestartattempt), 2);
    t.deepEqual(back.data, { outcome: 'succeeded' });
  }
});

test('the CloudEvents SDK reads what we write, in both modes', (t) => {
  for (const message of [toBinary(event), toStructured(event)]) {
    const sdkEvent = HTTP.toEvent({ headers: message.headers, body: message.body }) as CloudEvent<unknown>;
    t.is(sdkEvent.id, event.id);
    t.is(sdkEvent.subject, event.subject);
    t.is(sdkEvent.correlationid, 'abc.def');
    t.deepEqual(sdkEvent.data, event.data);
  }
});

test('binary data travels as data_base64 in structured mode', (t) => {
  const bytes = new Uint8Array([0, 1, 2, 253, 254, 255]);
  const message = toStructured({ ...event, datacontenttype: 'application/octet-stream', data: bytes });
  t.is(JSON.parse(String(message.body)).data_base64, 'AAEC/f7/');
  t.deepEqual(new Uint8Array(parsed(message).data as Uint8Array), bytes);
});

test('a binary-mode body without content-type is read as JSON', (t) => {
  const { headers, body } = toBinary(event);
  const { 'content-type': _, ...rest } = headers;
  t.deepEqual(parsed({ headers: rest, body }).data, event.data);
});

test('an empty binary-mode body means no data', (t) => {
  const { headers } = toBinary(event);
  t.is(parsed({ headers, body: '' }).data, undefined);
});

test('batch mode and other structured formats are refused with 415', (t) => {
  for (const contentType of ['application/cloudevents-batch+json', 'application/cloudevents+avro']) {
    const result = parseMessage({ headers: { 'content-type': contentType }, body: '[]' }, limit);
    t.false(result.ok);
    if (!result.ok) {
      t.is(result.error.code, 'unsupported-mode');
      t.is(result.error.status, 415);
    }
  }
});

test('the size bound counts bytes, not characters', (t) => {
  const body = JSON.stringify({ text: '\u00fc'.repeat(100) });
  const headers = toBinary(event).headers;
  const bytes = Buffer.byteLength(body);
  t.true(parseMessage({ headers, body }, { maxBytes: bytes }).ok);
  const result = parseMessage({ headers, body }, { maxBytes: bytes - 1 });
  t.false(result.ok);
  if (!result.ok) {
    t.is(result.error.code, 'too-large');
    t.is(result.error.status, 413);
  }
});

test('a missing id is refused even though the SDK would invent one', (t) => {
  const { id: _, ...withoutId } = JSON.parse(String(toStructured(event).body)) as Record<string, unknown>;
  const message = { headers: { 'content-type': 'application/cloudevents+json' }, body: JSON.stringify(withoutId) };
  t.truthy((HTTP.toEvent(message) as CloudEvent<unknown>).id);
  const result = parseMessage(message, limit);
  t.false(result.ok);
  if (!result.ok) t.is(result.error.reason, 'missing required attribute id');
});

// The README's reason for reading with our own codec: the SDK's reader builds events it never validates.
test('what the SDK reader takes, ours refuses', (t) => {
  const { headers, body } = toBinary(event);
  const lax = [
    { headers: { ...headers, 'ce-time': 'yesterday' }, body },
    { headers: { ...headers, 'ce-type': '' }, body },
    { headers: { ...headers, 'ce-specversion': '0.3' }, body },
    { headers: { ...headers, 'ce-source': undefined as unknown as string }, body },
    { headers: { ...headers, 'ce-id': 'a', 'CE-ID': 'b' }, body },
  ];
  for (const message of lax) {
    t.notThrows(() => HTTP.toEvent(message));
    t.false(parseMessage(message, limit).ok, JSON.stringify(message.headers));
  }
  const upper = { headers: { ...headers, 'CE-REPLYID': 'abc.def' }, body };
  t.false('replyid' in (HTTP.toEvent(upper) as CloudEvent<unknown>));
  t.is(parsed(upper).replyid, 'abc.def');
});

test('outgoing events are checked by the SDK: an invalid one is not sent', (t) => {
  t.throws(() => toBinary({ ...event, source: '' }));
  t.throws(() => toBinary({ ...event, 'bad-name': 'x' }));
  t.throws(() => toBinary({ ...event, note: { nested: true } }), { message: /cannot be sent as a header/ });
});

function refusal(message: Parameters<typeof parseMessage>[0]): string {
  const result = parseMessage(message, limit);
  if (result.ok) throw new Error('accepted');
  return `${result.error.code}: ${result.error.reason}`;
}

test('malformed messages are refused with one clear line each', (t) => {
  const { headers, body } = toBinary(event);
  const structured = JSON.parse(String(toStructured(event).body)) as Record<string, unknown>;
  const ce = { 'content-type': 'application/cloudevents+json' };
  t.regex(refusal({ headers: { ...headers, 'ce-specversion': '0.3' }, body }), /^malformed: unsupported specversion "0.3"/);
  t.regex(
    refusal({ headers: { ...headers, 'ce-specversion': undefined as unknown as string }, body }),
    /missing required attribute specversion/,
  );
  t.regex(refusal({ headers: { ...headers, 'ce-time': 'yesterday' }, body }), /time must be an RFC 3339 timestamp/);
  t.regex(refusal({ headers: { ...headers, 'ce-type': '' }, body }), /type must be a non-empty string/);
  t.regex(refusal({ headers: { ...headers, 'CE-ID': 'other' }, body }), /same header appears twice/);
  t.regex(refusal({ headers, body: new Uint8Array([0x7b, 0xff, 0x7d]) }), /not valid UTF-8/);
  t.regex(refusal({ headers: ce, body: '[1]' }), /must be a JSON object/);
  t.regex(refusal({ headers: ce, body: JSON.stringify({ ...structured, id: 7 }) }), /id must be a non-empty string/);
  t.regex(refusal({ headers: ce, body: JSON.stringify({ ...structured, prestarthook: { a: 1 } }) }), /extension attribute "prestarthook"/);
  t.regex(refusal({ headers: ce, body: JSON.stringify({ ...structured, data_base64: 'AA==' }) }), /both data and data_base64/);
  t.regex(refusal({ headers: { 'content-type': 'text/plain' }, body: 'hello' }), /^malformed: not a CloudEvent/);
});

test('headers that merely look like attributes are ignored', (t) => {
  const { headers, body } = toBinary(event);
  const back = parsed({ headers: { ...headers, 'ce-x-custom': '1', 'ce-data': 'sneaky', 'ce-datacontenttype': 'text/plain' }, body });
  t.false('x-custom' in back);
  t.deepEqual(back.data, event.data);
  t.is(back.datacontenttype, 'application/json');
});

test('binary-mode bodies that are not JSON come back as text or bytes', (t) => {
  const { headers } = toBinary(event);
  const bytes = new Uint8Array([0xff, 0x00, 0xfe]);
  const raw = parsed({ headers: { ...headers, 'content-type': 'application/octet-stream' }, body: bytes });
  t.deepEqual(raw.data, bytes);
  t.is(parsed({ headers: { ...headers, 'content-type': 'text/plain; charset=utf-8' }, body: 'done' }).data, 'done');
});
