import test from 'ava';
import { BoundedMap } from '../../../../hooks/sdk/lru.ts';

test('forgets the least recently used entry beyond its capacity', (t) => {
  const m = new BoundedMap<string, number>(2);
  m.set('a', 1);
  m.set('b', 2);
  t.is(m.get('a'), 1);
  m.set('c', 3);
  t.is(m.size, 2);
  t.is(m.get('b'), undefined, 'b was used least recently');
  t.is(m.get('a'), 1);
  t.is(m.get('c'), 3);
});

test('setting an existing key refreshes it', (t) => {
  const m = new BoundedMap<string, number>(2);
  m.set('a', 1);
  m.set('b', 2);
  m.set('a', 10);
  m.set('c', 3);
  t.false(m.has('b'));
  t.is(m.get('a'), 10);
});

test('refuses a capacity that is not a positive integer', (t) => {
  t.throws(() => new BoundedMap(0), { instanceOf: RangeError });
});
