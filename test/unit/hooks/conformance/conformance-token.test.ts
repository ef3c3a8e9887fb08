// R10: with sender identity on, every reply posted to the sink carries a bearer token.
import test from 'ava';
import { checkReplyTokens } from '../../../../hooks/conformance/checks.ts';
import type { ReceivedReply } from '../../../../hooks/conformance/reply-sink.ts';

const posted = (bearer: boolean): ReceivedReply => ({ at: 0, via: 'sink', bearer });
const inBody: ReceivedReply = { at: 0, via: 'answer' };

test('on: every posted reply needs a token; answers in the body need none', (t) => {
  t.like(checkReplyTokens([posted(true), inBody]), { passed: true });
  const failed = checkReplyTokens([posted(true), posted(false)]);
  t.false(failed.passed);
  t.regex(failed.detail, /1 of 2 replies .* no Authorization: Bearer/);
  t.regex(failed.detail, /PRESTART_TOKEN_FILE/);
});
