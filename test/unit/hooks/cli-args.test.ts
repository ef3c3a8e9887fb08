import test from 'ava';
import { InvalidArgumentError } from 'commander';
import { keyText, keyValue, kinds, parseValue } from '../../../hooks/cli-args.ts';

test('--param values that look like JSON literals are read as JSON, the rest as text', (t) => {
  t.is(parseValue('true'), true);
  t.is(parseValue('3'), 3);
  t.is(parseValue('-1.5'), -1.5);
  t.is(parseValue('007'), '007', 'not a canonical number: kept as text');
  t.deepEqual(parseValue('{"a":1}'), { a: 1 });
  t.is(parseValue('{oops'), '{oops');
  t.is(parseValue('orders-db'), 'orders-db');
});

test('repeated --param options accumulate; values may contain "="', (t) => {
  t.deepEqual(keyValue('b=x=y', keyValue('a=1', {})), { a: 1, b: 'x=y' });
  t.throws(() => keyValue('novalue', {}), { instanceOf: InvalidArgumentError });
});

test('--annotation values stay text', (t) => {
  t.deepEqual(keyText('n=1', {}), { n: '1' });
});

test('--allow takes a comma-separated list of contribution kinds', (t) => {
  t.deepEqual(kinds('env, volume'), ['env', 'volume']);
  t.throws(() => kinds('env,secret'), { message: '"secret" is not one of env, envFrom, volume' });
});
