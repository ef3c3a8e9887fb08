// R11 against real hook services: an SDK hook that answers retry (ask me again) is asked again as
// the next attempt and passes; a hook whose retry says not when, or that keeps working on the
// attempt it asked to retry, fails R11 with what to change.
import test from 'ava';
import { failuresOf, formatReport, runConformance } from '../../../../hooks/conformance/index.ts';
import { RULES_WITHOUT_IDENTITY } from '../../../../hooks/conformance/rules.ts';
import { retryAfter, succeed } from '../../../../hooks/sdk/index.ts';
import { buildCompleted, toBinary } from '../../../../schemas/index.ts';
import { postTo, serveBroken } from '../../../fixtures/broken-hooks/_skeleton.ts';
import { start as malformedRetry } from '../../../fixtures/broken-hooks/malformed-retry.ts';
import { hookFor } from '../_support.ts';

const fast = { timeoutMs: 10_000, quietMs: 300 };
const R11 = 'R11-retry-well-formed-and-honoured';

test('an SDK hook that asks to be asked again passes every rule, R11 included', async (t) => {
  const hook = await hookFor(t, {
    name: 'quota',
    handler: async (req) => (req.params.busy === true && req.attempt === 1 ? retryAfter(1, 'quota busy') : succeed('granted')),
  });
  const report = await runConformance(hook.url, { hook: 'quota', ...fast, retryParams: { busy: true } });
  t.deepEqual(failuresOf(report), [], formatReport(report, { verbose: true }));
  t.deepEqual([...new Set(report.checks.map((c) => c.rule))].sort(), [...RULES_WITHOUT_IDENTITY, R11].sort());
  t.regex(
    report.checks.find((c) => c.rule === R11)?.detail ?? '',
    /^attempt 1: retry "quota busy" after 1 s, asked again 1\.0 s later; attempt 2: succeeded "granted"$/,
  );
});

test('a retry without retryAfter fails R11, quoting the gate refusal', async (t) => {
  const hook = await malformedRetry('db');
  t.teardown(() => hook.close());
  const report = await runConformance(hook.url, { hook: 'db', ...fast, retryParams: { busy: true } });
  t.deepEqual(
    failuresOf(report).map((c) => c.rule),
    [R11],
  );
  t.is(
    failuresOf(report, R11)[0]?.detail,
    'the retry probe (with params {"busy":true}) got a reply the gate refuses: invalid-data: data: outcome "retry" needs retryAfter (seconds until the gate asks again, 1 to 86400) and a message (the reason): a retry carries retryAfter (whole seconds, 1 to 86400) and the reason in message',
  );
  // Without --retry-param nothing asks it to retry, so R11 is not in the report.
  const plain = await runConformance(hook.url, { hook: 'db', ...fast });
  t.true(plain.passed, formatReport(plain));
  t.false(plain.checks.some((c) => c.rule === R11));
});

test('a hook that keeps working on the attempt it asked to retry fails R11', async (t) => {
  const hook = await serveBroken('db', (request, res) => {
    const busy = request.data.hook.params.busy === true && request.data.attempt === 1;
    const answer = buildCompleted(
      busy
        ? { request, source: '/broken/late', outcome: 'retry', retryAfter: 1, message: 'quota busy' }
        : { request, source: '/broken/late', outcome: 'succeeded', message: 'created' },
    );
    const message = toBinary(answer);
    res.status(200).set(message.headers).send(Buffer.from(message.body));
    // The mistake: the work of attempt 1 goes on, and its result is posted anyway.
    if (busy) {
      setTimeout(
        () => void postTo(request.data.replyTo, toBinary(buildCompleted({ request, source: '/broken/late', outcome: 'succeeded' }))),
        200,
      );
    }
  });
  t.teardown(() => hook.close());
  const report = await runConformance(hook.url, { hook: 'db', ...fast, retryParams: { busy: true } });
  t.is(
    failuresOf(report, R11)[0]?.detail,
    'after asking to be asked again, attempt 1 still sent succeeded: the gate refuses it (a stale attempt); stop the work when you answer retry',
  );
});
