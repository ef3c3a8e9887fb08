import test from 'ava';
import {
  CANCEL_FINALIZER,
  HOLD_LABEL,
  HOOKS_ANNOTATION,
  INJECT_LABEL,
  REASON_ANNOTATION,
  type RevisionView,
} from '../../../../api/types.ts';
import { parseHookNames, stampRevision } from '../../../../gate/core/stamp.ts';
import { hook, revision } from './_builders.ts';
import { applyPatch } from './_jsonpatch.ts';

interface RawMeta {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string>; finalizers?: string[] };
}

/** The admission object the view was built from: maps and lists absent when empty, as in a real request. */
function raw(rev: RevisionView): RawMeta {
  const metadata: RawMeta['metadata'] = { name: rev.name };
  if (Object.keys(rev.labels).length > 0) metadata.labels = { ...rev.labels };
  if (Object.keys(rev.annotations).length > 0) metadata.annotations = { ...rev.annotations };
  if (rev.finalizers.length > 0) metadata.finalizers = [...rev.finalizers];
  return { metadata };
}

function stamped(rev: RevisionView, hooks = [hook('db', { order: 2 }), hook('cache', { order: 1 })]) {
  const result = stampRevision(rev, {}, hooks);
  return { ...result, after: applyPatch(raw(rev), result.patch).metadata };
}

test('holds a Revision without labels, annotations or finalizers', (t) => {
  const { hookNames, after, patch } = stamped(revision());
  t.deepEqual(hookNames, ['cache', 'db']);
  t.deepEqual(after.labels, { [HOLD_LABEL]: 'true' });
  t.deepEqual(after.annotations, { [HOOKS_ANNOTATION]: '["cache","db"]' });
  t.deepEqual(after.finalizers, [CANCEL_FINALIZER]);
  t.is(parseHookNames(after.annotations ?? {})?.length, 2);
  t.true(
    patch.every((op) => !op.path.slice(1).includes('prestart.dev/')),
    'slashes in keys are escaped',
  );
});

test('adds to existing maps and lists, escaping "/" as ~1', (t) => {
  const rev = revision({ labels: { app: 'shop' }, annotations: { note: 'x' }, finalizers: ['other/finalizer'] });
  const { after, patch } = stamped(rev);
  t.deepEqual(after.labels, { app: 'shop', [HOLD_LABEL]: 'true' });
  t.deepEqual(after.annotations, { note: 'x', [HOOKS_ANNOTATION]: '["cache","db"]' });
  t.deepEqual(after.finalizers, ['other/finalizer', CANCEL_FINALIZER]);
  t.true(patch.some((op) => op.path === '/metadata/labels/prestart.dev~1hold'));
});

test('a held Revision cannot carry a forged hook list, reason or inject label', (t) => {
  const rev = revision({
    labels: { [HOLD_LABEL]: 'true', [INJECT_LABEL]: 'true', app: 'shop' },
    annotations: { [HOOKS_ANNOTATION]: '[]', [REASON_ANNOTATION]: 'all good, trust me' },
    finalizers: [CANCEL_FINALIZER],
  });
  const { after } = stamped(rev);
  t.deepEqual(after.labels, { [HOLD_LABEL]: 'true', app: 'shop' });
  t.deepEqual(after.annotations, { [HOOKS_ANNOTATION]: '["cache","db"]' });
  t.deepEqual(after.finalizers, [CANCEL_FINALIZER], 'the finalizer is not added twice');
});

test('without matching hooks, everything gate-owned the tenant put on the template is removed', (t) => {
  const rev = revision({
    labels: { [HOLD_LABEL]: 'true', [INJECT_LABEL]: 'true', app: 'shop' },
    annotations: { [HOOKS_ANNOTATION]: '["db"]', [REASON_ANNOTATION]: 'held', note: 'x' },
    finalizers: [CANCEL_FINALIZER, 'other', CANCEL_FINALIZER],
  });
  const { hookNames, after } = stamped(rev, [hook('db', { match: { annotation: { key: 'never' } } })]);
  t.deepEqual(hookNames, []);
  t.deepEqual(after.labels, { app: 'shop' });
  t.deepEqual(after.annotations, { note: 'x' });
  t.deepEqual(after.finalizers, ['other']);
});

test('without matching hooks a clean Revision is left alone', (t) => {
  t.deepEqual(stampRevision(revision({ labels: { app: 'shop' } }), {}, []).patch, []);
});

test('parseHookNames accepts only a JSON list of distinct names', (t) => {
  const p = (v?: string) => parseHookNames(v === undefined ? {} : { [HOOKS_ANNOTATION]: v });
  t.deepEqual(p('["a","b"]'), ['a', 'b']);
  t.deepEqual(p('[]'), []);
  t.is(p(), undefined);
  t.is(p('a,b'), undefined);
  t.is(p('{"a":1}'), undefined);
  t.is(p('["a",1]'), undefined);
  t.is(p('["a","a"]'), undefined);
  t.is(p('[""]'), undefined);
});
