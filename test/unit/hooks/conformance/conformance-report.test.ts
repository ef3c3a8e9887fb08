import test from 'ava';
import { failuresOf, formatReport } from '../../../../hooks/conformance/report.ts';
import type { Report } from '../../../../hooks/conformance/rules.ts';

const report: Report = {
  url: 'http://127.0.0.1:8080',
  hook: 'db',
  passed: false,
  checks: [
    { rule: 'R1-replies-with-valid-completed', passed: true, detail: 'fine' },
    { rule: 'R5-no-non-cloudevent-2xx-body', passed: false, detail: 'answered 200 with {"status":"ok"}' },
    { rule: 'R7-answers-fast', passed: true, detail: 'fast' },
  ],
};

test('one line per failure, one per passed rule, and a summary naming the protocol sections', (t) => {
  t.is(
    formatReport(report),
    [
      'conformance of http://127.0.0.1:8080 (hook "db")',
      'FAIL R5-no-non-cloudevent-2xx-body: answered 200 with {"status":"ok"}',
      'ok   R1-replies-with-valid-completed: a valid request gets a final revision.prestart.completed the gate accepts',
      'ok   R7-answers-fast: every delivery is answered within 2 s',
      'FAILED: 1 of 3 rules (1 of 3 checks); see docs/protocol.md#rules-for-hooks (3. Never answer with a non-empty body that is not a CloudEvent)',
    ].join('\n'),
  );
});

test('verbose prints every passed check with its detail', (t) => {
  t.regex(formatReport(report, { verbose: true }), /^ok {3}R7-answers-fast: fast$/m);
});

test('failuresOf filters by rule', (t) => {
  t.is(failuresOf(report).length, 1);
  t.is(failuresOf(report, 'R1-replies-with-valid-completed').length, 0);
});
