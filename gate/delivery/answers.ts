// What came back with the start requests of one action list, handed to the intake (the same one
// the sinks use) after the list was applied. The core says what an answer means for the hook:
// a synchronous reply is recorded like any other, an invalid one or a permanent refusal fails the
// hook (deliveryFailureReply, invalidReplyFailure), a retriable failure waits for the resend.
import type { Logger } from 'pino';
import type { Reply } from '../../api/types.ts';
import type { Intake } from '../../sinks/intake.ts';
import { deliveryFailureReply, invalidReplyFailure, type RequestRef } from '../core/index.ts';
import type { SendResult } from './request-sender.ts';

export interface Answer {
  request: RequestRef;
  result: SendResult;
}

export async function takeAnswers(answers: readonly Answer[], intake: Intake, log: Logger): Promise<void> {
  for (const answer of answers) await takeAnswer(answer, intake, log);
}

async function takeAnswer({ request, result }: Answer, intake: Intake, log: Logger): Promise<void> {
  const fields = { hook: request.hook, revision: `${request.namespace}/${request.revision}`, attempt: request.attempt };
  let failure: Reply | undefined;
  switch (result.type) {
    case 'accepted':
      return;
    case 'replied': {
      const handled = await intake.message(result.message);
      if (handled.outcome === 'transient') {
        log.warn({ ...fields, err: handled.error.message }, 'synchronous reply not recorded now; the resend asks again');
      }
      if (handled.outcome !== 'invalid') return;
      failure = invalidReplyFailure(request, handled.reason);
      break;
    }
    case 'undelivered':
      failure = deliveryFailureReply(request, result);
      if (!failure) {
        log.warn({ ...fields, err: result.reason }, 'request not delivered; will resend');
        return;
      }
      break;
  }
  log.warn({ ...fields, reason: failure.message }, 'the hook fails');
  const handled = await intake.reply(failure);
  if (handled.outcome === 'transient')
    log.warn({ ...fields, err: handled.error.message }, 'failure not recorded now; the resend asks again');
}
