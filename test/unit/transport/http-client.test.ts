// Reading an answer within a size bound, and folding headers from wherever they come.
import test from 'ava';
import { flattenHeaders } from '../../../schemas/http-binding.ts';
import { PostError, readLimited } from '../../../transport/http-client.ts';

async function* chunks(...parts: string[]): AsyncIterable<Uint8Array> {
  for (const part of parts) yield new TextEncoder().encode(part);
}

test('a body within the bound is read whole', async (t) => {
  t.is(Buffer.from(await readLimited(chunks('ab', 'cd'), 4)).toString(), 'abcd');
});

test('past the bound, "fail" refuses the answer and "truncate" keeps its first bytes', async (t) => {
  const err = await t.throwsAsync(readLimited(chunks('ab', 'cde'), 4), { instanceOf: PostError });
  t.is(err?.failure, 'too-large');
  t.regex(err?.message ?? '', /larger than the 4-byte limit/);
  t.is(Buffer.from(await readLimited(chunks('ab', 'cde', 'fgh'), 4, 'truncate')).toString(), 'abcd');
});

test('fetch, node and SDK headers fold into one lowercase map', (t) => {
  t.deepEqual(flattenHeaders(new Headers({ 'CE-ID': 'a', 'Content-Type': 'application/json' })), {
    'ce-id': 'a',
    'content-type': 'application/json',
  });
  t.deepEqual(flattenHeaders({ 'CE-ID': 'a', via: ['1.1 a', '1.1 b'], 'ce-prestartattempt': 2, none: undefined }), {
    'ce-id': 'a',
    via: '1.1 a, 1.1 b',
    'ce-prestartattempt': '2',
  });
});
