import test from 'ava';
import { HOLD_LABEL } from '../../../../api/types.ts';
import {
  applyReply,
  decide,
  hooksFor,
  labelSelectorMatches,
  parseDurationSeconds,
  parseHookNames,
  podPatch,
  snapshotHook,
  stampRevision,
} from '../../../../gate/core/index.ts';

test('the core is importable from one place', (t) => {
  const fns = {
    applyReply,
    decide,
    hooksFor,
    labelSelectorMatches,
    parseDurationSeconds,
    parseHookNames,
    podPatch,
    snapshotHook,
    stampRevision,
  };
  for (const [name, fn] of Object.entries(fns)) t.is(typeof fn, 'function', name);
  t.is(HOLD_LABEL, 'prestart.dev/hold');
});
