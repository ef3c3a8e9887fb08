// How the gate reads a hook's (or a Broker ingress's) HTTP answer.
import test from 'ava';
import { classifyBrokerStatus } from '../../../emitter/broker.ts';
import { classifyHookResponse } from '../../../emitter/http-response.ts';
import { bodyExcerpt, carriesCloudEvent, isRetriableStatus } from '../../../schemas/http-binding.ts';

const binary = { 'ce-specversion': '1.0', 'ce-id': '1', 'content-type': 'application/json' };
const structured = { 'content-type': 'application/cloudevents+json; charset=utf-8' };

test('2xx with a CloudEvent in either mode is a reply', (t) => {
  t.is(classifyHookResponse(200, binary, 20, '').type, 'replied');
  t.is(classifyHookResponse(201, structured, 20, '').type, 'replied');
  t.is(classifyHookResponse(202, binary, 20, '').type, 'replied');
});

test('2xx without a body is accepted', (t) => {
  for (const status of [200, 202, 204]) t.is(classifyHookResponse(status, {}, 0, '').type, 'accepted');
});

test('202 keeps meaning accepted whatever informational body it carries', (t) => {
  t.is(classifyHookResponse(202, { 'content-type': 'text/plain' }, 8, 'queued #4').type, 'accepted');
});

test('200 with a body that is not a CloudEvent is a permanent failure naming the fix', (t) => {
  const verdict = classifyHookResponse(200, { 'content-type': 'text/html' }, 12, '<html>ok</html>');
  t.is(verdict.type, 'fail');
  if (verdict.type === 'fail') {
    t.regex(verdict.reason, /not a CloudEvent \(text\/html\)/);
    t.regex(verdict.reason, /<html>ok<\/html>/);
  }
});

test('the statuses Knative retries are the ones retried here', (t) => {
  for (const status of [408, 409, 429, 500, 502, 503, 504]) t.true(isRetriableStatus(status), String(status));
  for (const status of [400, 401, 403, 404, 410, 413, 415, 422]) t.false(isRetriableStatus(status), String(status));
  t.like(classifyHookResponse(503, {}, 0, ''), { type: 'retry', reason: 'hook answered 503' });
  t.like(classifyHookResponse(404, {}, 9, 'not found'), { type: 'fail', reason: 'hook answered 404: not found' });
  t.regex((classifyHookResponse(302, {}, 0, '') as { reason: string }).reason, /redirects are not followed/);
});

test('for the Broker ingress a 404 is retried (the Broker may be on its way) and drops the cached address', (t) => {
  t.like(classifyBrokerStatus(404, ''), { type: 'retry', forgetAddress: true });
  t.like(classifyBrokerStatus(503, ''), { type: 'retry', forgetAddress: false });
  t.like(classifyBrokerStatus(400, 'bad event'), { type: 'fail', reason: 'Broker ingress answered 400: bad event' });
});

test('a CloudEvent is recognised by its ce- headers or an application/cloudevents media type', (t) => {
  t.true(carriesCloudEvent({ 'ce-type': 'x' }));
  t.true(carriesCloudEvent(structured));
  t.false(carriesCloudEvent({ 'content-type': 'application/json' }));
  t.false(carriesCloudEvent({}));
});

test('body excerpts are one short printable line', (t) => {
  t.is(bodyExcerpt(Buffer.from('line one\r\n\tline two')), 'line one line two');
  const long = bodyExcerpt(Buffer.from('a'.repeat(500)), 10);
  t.is(long, `${'a'.repeat(10)}…`);
});
