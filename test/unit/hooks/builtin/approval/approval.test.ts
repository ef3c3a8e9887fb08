import test from 'ava';
import {
  type Decision,
  decidedAt,
  decisionAnnotations,
  decisionId,
  describeDecision,
  readDecisions,
} from '../../../../../hooks/builtin/approval/decision.ts';
import { type ApprovalRules, countText, readRules, tally, tallyMessage } from '../../../../../hooks/builtin/approval/rules.ts';
import { ParamReader } from '../../../../../hooks/builtin/common/params.ts';
import { runCli } from '../../../../support/hook-cli.ts';

const AUTH = 'system:authenticated';

/** The annotations `knative-prestart approve` writes, and managedFields as the apiserver records one write per person. */
function revisionMeta(decisions: { user: string; groups?: string[]; verdict?: 'approved' | 'rejected'; message?: string; at: string }[]) {
  const annotations: Record<string, string> = { other: 'x' };
  const managedFields = decisions.map((d) => {
    const written = decisionAnnotations({ username: d.user, groups: d.groups ?? [AUTH] }, d.verdict ?? 'approved', d.message);
    Object.assign(annotations, written);
    const fields = Object.fromEntries(Object.keys(written).map((k) => [`f:${k}`, {}]));
    return {
      manager: `knative-prestart-approve-${decisionId(d.user)}`,
      operation: 'Update',
      time: new Date(d.at),
      fieldsV1: { 'f:metadata': { 'f:annotations': fields } },
    };
  });
  return { annotations, managedFields };
}

function decide(
  user: string,
  opts: { groups?: string[]; verdict?: 'approved' | 'rejected'; message?: string; at?: string } = {},
): Decision {
  const d: Decision = {
    id: decisionId(user),
    username: user,
    groups: opts.groups ?? [AUTH],
    verdict: opts.verdict ?? 'approved',
    at: opts.at ?? '2030-01-01T10:00:00.000Z',
  };
  if (opts.message) d.message = opts.message;
  return d;
}

function rules(params: Record<string, unknown>): ApprovalRules {
  const r = new ParamReader(params);
  const read = readRules(r);
  if (r.problems.length > 0) throw new Error(r.problems.join('; '));
  return read;
}

test('each decision says who (username and groups), when (from managedFields) and why, earliest first', (t) => {
  const meta = revisionMeta([
    { user: 'bob', groups: ['sre', AUTH], message: ' looks fine ', at: '2030-01-01T10:07:00Z' },
    { user: 'alice', verdict: 'rejected', message: 'not during the freeze', at: '2030-01-01T10:05:00Z' },
  ]);
  const { decisions, invalid } = readDecisions(meta);
  t.deepEqual(invalid, []);
  t.deepEqual(decisions.map(describeDecision), [
    'rejected by alice (groups: system:authenticated) at 2030-01-01T10:05:00.000Z: not during the freeze',
    'approved by bob (groups: sre, system:authenticated) at 2030-01-01T10:07:00.000Z: looks fine',
  ]);
  t.is(decidedAt([], 'prestart.dev/approval.x'), undefined);
  t.deepEqual(readDecisions(undefined), { decisions: [], invalid: [] });
});

test('annotations the policy would have refused make no decision, and say why', (t) => {
  const id = decisionId('alice');
  const { decisions, invalid } = readDecisions({
    annotations: {
      [`prestart.dev/approval.${id}`]: 'yes',
      [`prestart.dev/approval-by.${id}`]: 'alice',
      'prestart.dev/approval.0000': 'approved',
    },
  });
  t.deepEqual(decisions, []);
  t.is(invalid[0], `prestart.dev/approval.${id} is "yes", neither approved nor rejected`);
  t.regex(invalid[1] ?? '', /^prestart\.dev\/approval\.0000 is set without prestart\.dev\/approval-by\.0000/);
});

test('an existing one-approver config is N=1: the first approval releases, with the old message', (t) => {
  const one = rules({});
  t.deepEqual(one, { needed: 1, users: [], groups: [], serviceAccounts: [], required: [] });
  const result = tally([decide('dave', { message: 'ok' })], one, undefined);
  t.is(result.outcome, 'approved');
  t.is(tallyMessage(result), 'approved by dave (groups: system:authenticated) at 2030-01-01T10:00:00.000Z: ok');
  const listed = rules({ approvers: ['alice', 'bob'] });
  t.is(tally([decide('dave')], listed, undefined).outcome, 'waiting', 'params.approvers still narrows whose decisions count');
  t.regex(tallyMessage(tally([decide('dave')], listed, undefined)), /ignored: approved by dave .*\(this hook counts only alice, bob\)$/);
});

test('N of M: two of three approvers release it; one is not enough', (t) => {
  const r = rules({ approvals: 2, approvers: ['alice', 'bob', 'carol'] });
  const one = tally([decide('bob')], r, undefined);
  t.is(one.outcome, 'waiting');
  t.is(countText(one), '1 of 2 approvals; still needs 1 more');
  const two = tally([decide('bob'), decide('carol')], r, undefined);
  t.is(two.outcome, 'approved');
  t.deepEqual(
    two.approvals.map((d) => d.username),
    ['bob', 'carol'],
  );
  t.regex(tallyMessage(two), /^2 of 2 approvals; approved by bob .*; approved by carol /);
});

test('groups: a member of an approver group counts; someone in none does not', (t) => {
  const r = rules({ approvals: 2, approverGroups: ['sre', 'dba'] });
  const result = tally([decide('erin', { groups: ['sre', AUTH] }), decide('mallory', { groups: ['devs', AUTH] })], r, undefined);
  t.is(result.outcome, 'waiting');
  t.deepEqual(
    result.approvals.map((d) => d.username),
    ['erin'],
  );
  t.is(result.ignored[0]?.why, 'this hook counts only members of sre, dba');
});

test('the same person in two approver groups counts once', (t) => {
  const r = rules({ approvals: 2, approverGroups: ['sre', 'dba'] });
  const result = tally([decide('erin', { groups: ['sre', 'dba', AUTH] })], r, undefined);
  t.is(result.outcome, 'waiting');
  t.is(countText(result), '1 of 2 approvals; still needs 1 more');
});

test('a person who approves twice counts once (the policy refuses the second; the hook does not rely on it)', (t) => {
  const r = rules({ approvals: 2, approverGroups: ['sre'] });
  const twice = [
    decide('erin', { groups: ['sre'] }),
    { ...decide('erin', { groups: ['sre'], at: '2030-01-01T10:01:00.000Z' }), id: 'forged' },
  ];
  const result = tally(twice, r, undefined);
  t.is(result.outcome, 'waiting');
  t.is(result.approvals.length, 1);
  t.is(result.ignored[0]?.why, 'erin already decided');
});

test('ServiceAccounts approve by namespace/name, as the apiserver names them', (t) => {
  const r = rules({ approverServiceAccounts: ['ops/release-bot'] });
  t.deepEqual(r.serviceAccounts, ['system:serviceaccount:ops:release-bot']);
  t.is(tally([decide('system:serviceaccount:ops:release-bot')], r, undefined).outcome, 'approved');
  t.is(tally([decide('system:serviceaccount:dev:release-bot')], r, undefined).outcome, 'waiting', 'the same name in another namespace');
  const bad = new ParamReader({ approverServiceAccounts: ['release-bot'], requiredServiceAccounts: ['a/b/c'] });
  readRules(bad);
  t.deepEqual(bad.problems, [
    'params.approverServiceAccounts must list namespace/name, got "release-bot"',
    'params.requiredServiceAccounts must list namespace/name, got "a/b/c"',
  ]);
});

test('required approvers must be among the approvals, however many others approve', (t) => {
  const r = rules({ approvals: 2, approvers: ['bob', 'carol'], requiredApprovers: ['alice'], requiredServiceAccounts: ['ops/bot'] });
  t.deepEqual(r.required, ['alice', 'system:serviceaccount:ops:bot']);
  const others = tally([decide('bob'), decide('carol')], r, undefined);
  t.is(others.outcome, 'waiting');
  t.is(countText(others), '2 of 2 approvals; still needs alice (required) and system:serviceaccount:ops:bot (required)');
  const all = tally([decide('bob'), decide('alice'), decide('system:serviceaccount:ops:bot')], r, undefined);
  t.is(all.outcome, 'approved', 'a required approver may decide without being listed among the approvers');
  const one = tally(
    [decide('bob')],
    rules({ approvals: 2, approvers: ['alice', 'bob', 'carol'], requiredApprovers: ['alice'] }),
    undefined,
  );
  t.is(countText(one), '1 of 2 approvals; still needs alice (required)');
});

test('the Revision’s author may not approve it, but may reject it', (t) => {
  const r = rules({});
  const own = tally([decide('mallory')], r, 'mallory');
  t.is(own.outcome, 'waiting');
  t.is(own.ignored[0]?.why, 'mallory wrote this Revision (serving.knative.dev/creator), and its author may not approve it');
  t.is(tally([decide('mallory'), decide('dave')], r, 'mallory').outcome, 'approved', 'someone else approves');
  t.is(tally([decide('mallory', { verdict: 'rejected' })], r, 'mallory').outcome, 'rejected');
});

test('one rejection from an allowed person fails it with the rejecter’s words; a rejection from anyone else is ignored', (t) => {
  const r = rules({ approvals: 2, approvers: ['alice', 'bob', 'carol'] });
  const result = tally([decide('bob'), decide('carol', { verdict: 'rejected', message: 'not during the freeze' })], r, undefined);
  t.is(result.outcome, 'rejected');
  t.regex(
    tallyMessage(result),
    /^rejected by carol \(groups: system:authenticated\) at \S+: not during the freeze; 1 of 2 approvals; still needs 1 more; approved by bob /,
  );
  const stranger = tally([decide('mallory', { verdict: 'rejected', message: 'no' })], r, undefined);
  t.is(stranger.outcome, 'waiting');
  t.is(stranger.ignored.length, 1);
});

test('params that cannot be met, or are not of the right shape, are named', (t) => {
  const r = new ParamReader({ approvals: 3, approvers: ['alice', 'bob'] });
  readRules(r);
  t.deepEqual(r.problems, ['params.approvals is 3, but only 2 people are allowed to approve']);
  const bad = new ParamReader({ approvals: 0, approverGroups: 'sre' });
  readRules(bad);
  t.deepEqual(bad.problems, [
    'params.approvals must be a whole number ≥ 1, got 0',
    'params.approverGroups must be a list of strings, got "sre"',
  ]);
  t.deepEqual(rules({ approvals: 5, approverGroups: ['sre'] }).needed, 5, 'a group has as many members as it has');
});

test('a rejection without a message is refused before anything is asked of the cluster', async (t) => {
  for (const args of [
    ['reject', 'checkout-00002'],
    ['approve', 'checkout-00002', '--reject', '--message', ' '],
  ]) {
    const { out, code } = await runCli([...args, '--kubeconfig', '/nonexistent/kubeconfig']);
    t.is(code, 1, args.join(' '));
    t.is(out, 'error: say why with --message TEXT: a rejection fails the hook with it, and it is final\n');
  }
});
