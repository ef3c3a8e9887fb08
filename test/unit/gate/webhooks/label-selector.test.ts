import test from 'ava';
import { parseLabelSelector } from '../../../../gate/webhooks/label-selector.ts';

test('equality terms become matchLabels, the others matchExpressions', (t) => {
  t.deepEqual(parseLabelSelector('prestart.dev/gate=a'), { matchLabels: { 'prestart.dev/gate': 'a' } });
  t.deepEqual(parseLabelSelector(' team == x , tier in (web, api),env notin (dev),legacy!=yes, managed, !skip '), {
    matchLabels: { team: 'x' },
    matchExpressions: [
      { key: 'tier', operator: 'In', values: ['web', 'api'] },
      { key: 'env', operator: 'NotIn', values: ['dev'] },
      { key: 'legacy', operator: 'NotIn', values: ['yes'] },
      { key: 'managed', operator: 'Exists' },
      { key: 'skip', operator: 'DoesNotExist' },
    ],
  });
  t.deepEqual(parseLabelSelector(''), {});
});

test('selectors Kubernetes would reject are refused with the offending term', (t) => {
  t.throws(() => parseLabelSelector('a in ()'), { message: /"a in \(\)" needs at least one value/ });
  t.throws(() => parseLabelSelector('a>1'), { message: /cannot parse "a>1"/ });
  t.throws(() => parseLabelSelector('a=1,a=2'), { message: /"a" cannot equal two values/ });
});
