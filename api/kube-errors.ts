// The Kubernetes API's errors as the rest of the house reads them: a status code, and one line a
// person can act on (the apiserver's own sentence, not a client exception dump).
import { ApiException } from '@kubernetes/client-node';

export function statusOf(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  return undefined;
}

/** One line for logs and messages: "HTTP 403: <the apiserver's own sentence>", or the error's message. */
export function errorLine(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = typeof err.body === 'string' ? parseJson(err.body) : err.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    const text = typeof message === 'string' ? message : typeof err.body === 'string' ? err.body.slice(0, 300) : `${err.message}`;
    return `HTTP ${err.code}: ${text}`;
  }
  return err instanceof Error ? err.message : String(err);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export const isConflict = (err: unknown): boolean => statusOf(err) === 409;
export const isNotFound = (err: unknown): boolean => statusOf(err) === 404;
