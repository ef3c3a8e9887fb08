import test from 'ava';
import { hooksFor, labelSelectorErrors, labelSelectorMatches } from '../../../../gate/core/match.ts';
import { hook, revision } from './_builders.ts';

const labels = { app: 'shop', tier: 'web' };

test('an empty or absent selector matches everything', (t) => {
  t.true(labelSelectorMatches(undefined, labels));
  t.true(labelSelectorMatches({}, labels));
  t.true(labelSelectorMatches({}, {}));
});

test('matchLabels needs every pair', (t) => {
  t.true(labelSelectorMatches({ matchLabels: { app: 'shop' } }, labels));
  t.true(labelSelectorMatches({ matchLabels: { app: 'shop', tier: 'web' } }, labels));
  t.false(labelSelectorMatches({ matchLabels: { app: 'shop', tier: 'db' } }, labels));
  t.false(labelSelectorMatches({ matchLabels: { team: 'a' } }, labels));
});

test('matchExpressions follow Kubernetes semantics', (t) => {
  const m = (operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist', key: string, values?: string[]) =>
    labelSelectorMatches({ matchExpressions: [{ key, operator, ...(values ? { values } : {}) }] }, labels);
  t.true(m('In', 'tier', ['web', 'api']));
  t.false(m('In', 'tier', ['db']));
  t.false(m('In', 'missing', ['x']));
  t.true(m('NotIn', 'tier', ['db']));
  t.false(m('NotIn', 'tier', ['web']));
  t.true(m('NotIn', 'missing', ['x']), 'NotIn matches when the key is absent');
  t.true(m('Exists', 'app'));
  t.false(m('Exists', 'missing'));
  t.true(m('DoesNotExist', 'missing'));
  t.false(m('DoesNotExist', 'app'));
});

test('matchLabels and matchExpressions must all hold', (t) => {
  const selector = {
    matchLabels: { app: 'shop' },
    matchExpressions: [{ key: 'tier', operator: 'In' as const, values: ['db'] }],
  };
  t.false(labelSelectorMatches(selector, labels));
  t.true(labelSelectorMatches(selector, { app: 'shop', tier: 'db' }));
});

test('a malformed requirement matches nothing and is reported', (t) => {
  t.false(labelSelectorMatches({ matchExpressions: [{ key: 'app', operator: 'In', values: [] }] }, labels));
  t.false(labelSelectorMatches({ matchExpressions: [{ key: 'app', operator: 'Exists', values: ['shop'] }] }, labels));
  t.deepEqual(labelSelectorErrors({ matchExpressions: [{ key: 'app', operator: 'Exists' }] }), []);
  t.is(labelSelectorErrors({ matchExpressions: [{ key: 'app', operator: 'NotIn' }] }).length, 1);
  t.is(labelSelectorErrors({ matchExpressions: [{ key: 'app', operator: 'Is' as 'In', values: ['x'] }] }).length, 1);
});

test('a hook with an empty match applies to every Revision', (t) => {
  t.deepEqual(
    hooksFor(revision(), {}, [hook('db')]).map((h) => h.name),
    ['db'],
  );
});

test('annotation match needs the key, and the value when one is given', (t) => {
  const byKey = hook('db', { match: { annotation: { key: 'prestart.dev/db' } } });
  const byValue = hook('cache', { match: { annotation: { key: 'prestart.dev/cache', value: 'redis' } } });
  const names = (annotations: Record<string, string>) => hooksFor(revision({ annotations }), {}, [byKey, byValue]).map((h) => h.name);
  t.deepEqual(names({}), []);
  t.deepEqual(names({ 'prestart.dev/db': '' }), ['db']);
  t.deepEqual(names({ 'prestart.dev/cache': 'memcached' }), []);
  t.deepEqual(names({ 'prestart.dev/cache': 'redis', 'prestart.dev/db': 'yes' }), ['cache', 'db']);
});

test('namespace and revision selectors must both hold', (t) => {
  const h = hook('db', {
    match: {
      namespaceSelector: { matchLabels: { 'prestart.dev/enabled': 'true' } },
      revisionSelector: { matchExpressions: [{ key: 'app', operator: 'Exists' }] },
    },
  });
  const rev = revision({ labels: { app: 'shop' } });
  t.is(hooksFor(rev, { 'prestart.dev/enabled': 'true' }, [h]).length, 1);
  t.is(hooksFor(rev, {}, [h]).length, 0);
  t.is(hooksFor(revision(), { 'prestart.dev/enabled': 'true' }, [h]).length, 0);
});

test('hooks come sorted by order, then name', (t) => {
  const hooks = [hook('zeta', { order: 1 }), hook('beta', { order: 2 }), hook('alpha', { order: 1 }), hook('omega', { order: 0 })];
  t.deepEqual(
    hooksFor(revision(), {}, new Set(hooks)).map((h) => h.name),
    ['omega', 'alpha', 'zeta', 'beta'],
  );
});
