import test from 'ava';
import { decidedAt, describeDecision, readDecision } from '../../../../../hooks/builtin/approval/decision.ts';

const managedFields = [
  {
    manager: 'knative-prestart-gate',
    operation: 'Update',
    time: new Date('2030-01-01T10:00:00Z'),
    fieldsV1: { 'f:metadata': { 'f:labels': {} } },
  },
  {
    manager: 'knative-prestart-approve',
    operation: 'Update',
    time: '2030-01-01T10:05:00Z' as unknown as Date,
    fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:prestart.dev/approval': {}, 'f:prestart.dev/approval-by': {} } } },
  },
];

test('no annotation, no decision', (t) => {
  t.is(readDecision({ annotations: { other: 'x' } }), undefined);
  t.is(readDecision(undefined), undefined);
});

test('a decision says who, when (from managedFields) and why', (t) => {
  const d = readDecision({
    annotations: { 'prestart.dev/approval': 'approved', 'prestart.dev/approval-by': 'alice', 'prestart.dev/approval-reason': ' reviewed ' },
    managedFields,
  });
  t.deepEqual(d, { verdict: 'approved', by: 'alice', at: '2030-01-01T10:05:00Z', reason: 'reviewed' });
  t.is(describeDecision(d as never), 'approved by alice at 2030-01-01T10:05:00Z: reviewed');
  t.is(describeDecision({ verdict: 'rejected', by: 'bob' }), 'rejected by bob');
  t.is(decidedAt([]), undefined);
});

test('annotations the policy would have refused make no decision', (t) => {
  t.deepEqual(readDecision({ annotations: { 'prestart.dev/approval': 'yes', 'prestart.dev/approval-by': 'alice' } }), {
    invalid: 'prestart.dev/approval is "yes", neither approved nor rejected',
  });
  t.regex(
    (readDecision({ annotations: { 'prestart.dev/approval': 'approved' } }) as { invalid: string }).invalid,
    /without prestart\.dev\/approval-by/,
  );
});
