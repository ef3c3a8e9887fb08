// POSTing a CloudEvent message and reading what comes back, within a deadline and a size bound:
// the gate's direct HTTP transport, the hook SDK's reply sends and the conformance checker all
// send through here. Redirects are never followed: a hook or sink that redirects is misconfigured,
// and following would resend the event somewhere nobody chose.
import type { Message } from '../schemas/event.ts';
import { describeNetworkError, flattenHeaders } from '../schemas/http-binding.ts';

export interface PostMessageOptions {
  /** Whole-exchange deadline: connect, headers and body. */
  timeoutMs: number;
  /** Largest answer body read. */
  maxBytes: number;
  /** What a larger body is: an error ("fail", the default) or cut to its first maxBytes ("truncate", for error excerpts). */
  overflow?: Overflow;
  /** Ends the exchange early (shutdown). */
  signal?: AbortSignal;
  userAgent?: string;
}

export type Overflow = 'fail' | 'truncate';

export interface HttpAnswer {
  status: number;
  /** Lowercase names. */
  headers: Record<string, string>;
  body: Uint8Array;
}

export type PostFailure = 'timeout' | 'too-large' | 'aborted' | 'network';

/** Why no (complete) answer came; the message says it in one line, without the URL. */
export class PostError extends Error {
  override readonly name = 'PostError';
  constructor(
    message: string,
    readonly failure: PostFailure,
  ) {
    super(message);
  }
}

export async function postMessage(url: string, message: Message, opts: PostMessageOptions): Promise<HttpAnswer> {
  const deadline = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([deadline, opts.signal]) : deadline;
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: opts.userAgent === undefined ? message.headers : { ...message.headers, 'user-agent': opts.userAgent },
      // A copy typed over a plain ArrayBuffer, which is what fetch's BodyInit accepts.
      body: typeof message.body === 'string' ? message.body : new Uint8Array(message.body),
      redirect: 'manual',
      signal,
    });
    const overflow = opts.overflow ?? 'fail';
    const declared = Number(response.headers.get('content-length') ?? Number.NaN);
    if (overflow === 'fail' && declared > opts.maxBytes) {
      await response.body?.cancel().catch(() => {});
      throw tooLarge(opts.maxBytes, declared);
    }
    const body = response.body ? await readLimited(response.body, opts.maxBytes, overflow) : new Uint8Array(0);
    return { status: response.status, headers: flattenHeaders(response.headers), body };
  } catch (err) {
    if (err instanceof PostError) throw err;
    if (deadline.aborted) throw new PostError(`no complete answer within ${opts.timeoutMs} ms`, 'timeout');
    if (opts.signal?.aborted) throw new PostError(`aborted (${String(opts.signal.reason)})`, 'aborted');
    throw new PostError(describeNetworkError(err), 'network');
  }
}

/**
 * Reads a body (a fetch body or a node response) up to `max` bytes. Past it, "fail" throws a
 * PostError and "truncate" returns the first `max` bytes; either way the rest is not read (leaving
 * the loop cancels the stream).
 */
export async function readLimited(body: AsyncIterable<Uint8Array>, max: number, overflow: Overflow = 'fail'): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size + chunk.length > max) {
      if (overflow === 'fail') throw tooLarge(max);
      chunks.push(chunk.subarray(0, max - size));
      size = max;
      break;
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks, size);
}

function tooLarge(max: number, declared?: number): PostError {
  const what = declared === undefined ? 'the answer' : `the answer (${declared} bytes)`;
  return new PostError(`${what} is larger than the ${max}-byte limit`, 'too-large');
}
