// The CloudEvents NATS binding as the emitter writes it and the sink reads it.
import test from 'ava';
import { headers as natsHeaders } from 'nats';
import { KeyRing, parseCompleted, parseRequested, toBinary, toStructured } from '../../../schemas/index.ts';
import {
  fromNatsMessage,
  isValidPublishSubject,
  serverSupportsTermReason,
  subjectFor,
  toNatsHeaders,
} from '../../../schemas/nats-binding.ts';
import { completedEvent, requestEvent } from '../../support/events.ts';
import { keys } from '../../support/keys.ts';

test('binary mode: attributes become ce- headers and the data content type travels as ce-datacontenttype', (t) => {
  const event = requestEvent();
  const h = toNatsHeaders(toBinary(event));
  t.is(h.get('ce-id'), event.id);
  t.is(h.get('ce-specversion'), '1.0');
  t.is(h.get('ce-datacontenttype'), 'application/json');
  t.false(h.has('content-type'));
});

test('structured mode keeps its application/cloudevents+json content type, which marks the mode', (t) => {
  const h = toNatsHeaders(toStructured(completedEvent()));
  t.regex(h.get('content-type'), /^application\/cloudevents\+json/);
  t.false(h.has('ce-datacontenttype'));
});

test('a binary request survives the round trip through NATS headers', (t) => {
  const event = requestEvent({ hook: 'cache-warm', attempt: 4 });
  const message = toBinary(event);
  const body = new TextEncoder().encode(String(message.body));
  const parsed = parseRequested(fromNatsMessage(toNatsHeaders(message), body));
  t.true(parsed.ok);
  if (parsed.ok) t.like(parsed.request.data, { attempt: 4, hook: { name: 'cache-warm' } });
});

test('a structured reply survives the round trip and verifies', (t) => {
  const message = toStructured(completedEvent());
  const parsed = parseCompleted(fromNatsMessage(toNatsHeaders(message), new TextEncoder().encode(String(message.body))), {
    keys,
    maxBytes: 65536,
  });
  t.true(parsed.ok);
});

test('a reply signed by another gate still fails verification after the round trip', (t) => {
  const other = new KeyRing([KeyRing.generateKey()]);
  const message = toBinary(completedEvent(requestEvent({ ring: other })));
  const parsed = parseCompleted(fromNatsMessage(toNatsHeaders(message), new TextEncoder().encode(String(message.body))), {
    keys,
    maxBytes: 65536,
  });
  t.like(parsed, { ok: false, error: { code: 'bad-replyid' } });
});

test('header names from NATS are read case-insensitively; repeated headers keep the last value', (t) => {
  const h = natsHeaders();
  h.set('Ce-Id', 'abc');
  h.append('CE-TYPE', 'one');
  h.append('CE-TYPE', 'two');
  const m = fromNatsMessage(h, new Uint8Array());
  t.is(m.headers['ce-id'], 'abc');
  t.is(m.headers['ce-type'], 'two');
});

test('subjects: hook names make single tokens, wildcards and blanks are refused', (t) => {
  t.is(subjectFor('prestart.requests', 'db-migrate'), 'prestart.requests.db-migrate');
  t.throws(() => subjectFor('prestart.requests', 'a.'));
  t.true(isValidPublishSubject('team.a.hooks'));
  for (const bad of ['', 'a..b', 'a.*', 'a.>', 'a b']) t.false(isValidPublishSubject(bad), bad);
});

test('a term reason is sent only to servers that read it (2.11 and later)', (t) => {
  t.false(serverSupportsTermReason('2.9.10'));
  t.false(serverSupportsTermReason(undefined));
  t.true(serverSupportsTermReason('2.11.0'));
  t.true(serverSupportsTermReason('v2.15.2'));
  t.true(serverSupportsTermReason('3.0.0'));
});
