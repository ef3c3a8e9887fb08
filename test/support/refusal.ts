// What the apiserver said when it refused a write: the attack tests assert the code and the
// policy's message, and that an allowed write was allowed.
import { ApiException } from '@kubernetes/client-node';

export interface Refusal {
  code: number;
  /** The Status message (the admission policy's messageExpression), or the raw body. */
  message: string;
}

/** The apiserver's refusal of `write`, or undefined when it was accepted; other errors are thrown. */
export async function refusal(write: Promise<unknown>): Promise<Refusal | undefined> {
  return write.then(
    () => undefined,
    (e: unknown) => {
      if (!(e instanceof ApiException)) throw e;
      const body = typeof e.body === 'string' ? (JSON.parse(e.body) as { message?: string }) : (e.body as { message?: string });
      return { code: e.code, message: body?.message ?? String(e.body) };
    },
  );
}
