// The wording and verdict of each rule, from recorded answers and replies.
import test from 'ava';
import {
  checkBodies,
  checkCancelTaken,
  checkNotActedOn,
  checkRedelivery,
  checkReplies,
  checkReplyIds,
  checkSpeed,
} from '../../../../hooks/conformance/checks.ts';
import { requestEvent } from '../../../support/events.ts';
import { answer, jsonAnswer, reply } from './_answers.ts';

const request = requestEvent();

test('R1 passes with a final reply and says how it came', (t) => {
  const c = checkReplies(answer(202), [reply(request, 'progress'), reply(request, 'succeeded', { message: 'ready', at: 2_500 })], 30_000);
  t.true(c.passed);
  t.is(c.detail, 'the valid request (binary mode): succeeded "ready" posted to replyTo 1.5 s later and 1 progress report');
});

test('R9 asks of a request with unknown members what R1 asks, and says why it was special', (t) => {
  const what = { what: 'a valid request with data members a newer gate may add', probe: 'newer' };
  const ok = checkReplies(answer(202, what), [reply(request, 'succeeded', { message: 'ready' })], 5_000, 'R9-takes-newer-requests');
  t.like(ok, { rule: 'R9-takes-newer-requests', passed: true });
  const refused = checkReplies(
    jsonAnswer(422, { error: 'data has an unknown member "priority"' }, what),
    [],
    5_000,
    'R9-takes-newer-requests',
  );
  t.like(refused, { rule: 'R9-takes-newer-requests', passed: false });
  t.is(
    refused.detail,
    'a valid request with data members a newer gate may add answered 422: {"error":"data has an unknown member \\"priority\\""} (it carries data members a newer gate may add: ignore members you do not know): take a valid request (202) or answer it (200 with the completed event); report failures as a "failed" reply, not an HTTP error',
  );
});

test('R1 fails on an HTTP error with the status and the advice', (t) => {
  const c = checkReplies(jsonAnswer(500, { error: 'boom' }), [], 30_000);
  t.false(c.passed);
  t.regex(c.detail, /^the valid request \(binary mode\) answered 500: \{"error":"boom"\}: take a valid request \(202\)/);
});

test('R1 fails when no final reply came, counting progress reports', (t) => {
  const c = checkReplies(answer(202), [reply(request, 'progress')], 5_000);
  t.false(c.passed);
  t.regex(c.detail, /answered 202, then no final completed event \(succeeded or failed\) within 5\.0 s \(only 1 progress report\)/);
});

test("R1 fails with the gate's reason when it would refuse the reply", (t) => {
  const bad = {
    ...reply(request, 'succeeded'),
    reply: undefined,
    error: { code: 'invalid-data' as const, status: 422 as const, reason: 'data has an unknown member "contribution"' },
  };
  const c = checkReplies(answer(202), [bad], 5_000);
  t.is(
    c.detail,
    'the valid request (binary mode): the gate refuses a reply posted to replyTo: invalid-data: data has an unknown member "contribution"',
  );
});

test('R2 passes when the repeat after finishing got the same reply id', (t) => {
  const first = reply(request, 'succeeded', { id: 'r-1', at: 2_000 });
  const again = reply(request, 'succeeded', { id: 'r-1', at: 4_000 });
  const c = checkRedelivery({
    first: answer(202),
    whileRunning: answer(202),
    afterFinish: answer(202),
    before: [first],
    after: [again],
    waitedMs: 3_000,
  });
  t.true(c.passed);
  t.is(c.detail, 'a repeat while it ran joined the run; a repeat after it finished got the same reply (id r-1)');
});

test('R2 fails when a repeat after finishing gets a different outcome', (t) => {
  const c = checkRedelivery({
    first: answer(200),
    afterFinish: answer(200),
    before: [reply(request, 'succeeded', { message: 'database created', via: 'answer' })],
    after: [reply(request, 'failed', { message: 'database already exists', via: 'answer' })],
    waitedMs: 3_000,
  });
  t.false(c.passed);
  t.is(
    c.detail,
    'sent again after it finished, the request got a different outcome: first succeeded "database created", then failed "database already exists": the handler ran twice; remember finished results and send the same one again',
  );
});

test('R2 fails when two final replies with different ids answer a request delivered twice while running', (t) => {
  const c = checkRedelivery({
    first: answer(202),
    whileRunning: answer(202),
    afterFinish: answer(202),
    before: [reply(request, 'succeeded', { id: 'a' }), reply(request, 'succeeded', { id: 'b' })],
    after: [reply(request, 'succeeded', { id: 'a' })],
    waitedMs: 3_000,
  });
  t.false(c.passed);
  t.regex(c.detail, /^delivered twice while it ran, the request got 2 different final replies/);
});

test('R2 fails when a finished request sent again gets no reply', (t) => {
  const c = checkRedelivery({
    first: answer(202),
    afterFinish: answer(202),
    before: [reply(request, 'succeeded')],
    after: [],
    waitedMs: 3_000,
  });
  t.regex(c.detail, /^sent again after it finished \(succeeded\), the request got no reply within 3\.0 s: remember finished results/);
});

test('R2 accepts an identical result under a new id, and says so', (t) => {
  const c = checkRedelivery({
    first: answer(200),
    afterFinish: answer(200),
    before: [reply(request, 'succeeded', { message: 'ok' })],
    after: [reply(request, 'succeeded', { message: 'ok' })],
    waitedMs: 3_000,
  });
  t.true(c.passed);
  t.regex(c.detail, /identical result \(under a new event id/);
});

test('R4 wants a 4xx for a malformed request', (t) => {
  const c = checkNotActedOn('R4-rejects-malformed', answer(202, { what: 'a request without ce-id' }), [], {
    refuse: true,
    advice: 'parse it',
  });
  t.false(c.passed);
  t.is(c.detail, 'a request without ce-id answered 202: refuse it with a 4xx and a reason (parse it)');
  t.true(checkNotActedOn('R4-rejects-malformed', answer(400), [], { refuse: true, advice: '' }).passed);
});

test('R3 fails when a request for another hook gets a reply', (t) => {
  const c = checkNotActedOn(
    'R3-ignores-other-hooks',
    answer(202, { what: 'a request for hook "db-other"' }),
    [reply(request, 'succeeded')],
    {
      refuse: false,
      advice: 'compare data.hook.name',
    },
  );
  t.is(c.detail, 'a request for hook "db-other" was acted on: it got succeeded (compare data.hook.name)');
});

test('R3 refuses a 5xx for a request the hook should ignore', (t) => {
  t.false(checkNotActedOn('R3-ignores-other-hooks', answer(503), [], { refuse: false, advice: '' }).passed);
});

test('R5 names the first 2xx answer with a body that is not a CloudEvent', (t) => {
  const c = checkBodies([answer(202), jsonAnswer(200, { status: 'ok' }), jsonAnswer(400, { error: 'bad' })]);
  t.false(c.passed);
  t.is(
    c.detail,
    'the valid request (binary mode) was answered 200 with a body that is not a CloudEvent (application/json): {"status":"ok"}: a Broker turns that into a 502 and retries, so the hook runs again; answer 202 with an empty body',
  );
  t.true(checkBodies([answer(202), answer(200, { headers: { 'ce-specversion': '1.0' }, body: new Uint8Array([1]) })]).passed);
});

test('R6 shows the replyid that was sent and the correlationid it should have been', (t) => {
  const wrong = reply(request, 'succeeded', { id: 'r-9', correlationid: request.id });
  const c = checkReplyIds([wrong], () => String(request.correlationid));
  t.false(c.passed);
  t.regex(
    c.detail,
    /^reply r-9 has replyid ".*", which is not the request's correlationid ".*": copy the request's ce-correlationid into ce-replyid byte for byte$/,
  );
  t.true(checkReplyIds([reply(request, 'succeeded')], () => undefined).passed);
});

test('R7 names the slowest answer', (t) => {
  const c = checkSpeed([
    answer(202, { ms: 50 }),
    answer(200, { ms: 3_400, what: 'the valid request (binary mode)' }),
    answer(202, { ms: 2_100 }),
  ]);
  t.false(c.passed);
  t.is(
    c.detail,
    'the valid request (binary mode) was answered after 3.4 s (and 1 more) (limit 2.0 s): answer 202 at once and do the work in the background',
  );
});

test('R8 wants a cancel taken with a 2xx', (t) => {
  t.true(checkCancelTaken(answer(202)).passed);
  t.regex(checkCancelTaken(jsonAnswer(400, { error: 'unknown action' })).detail, /answered 400: .*take a cancel with 202/);
});
