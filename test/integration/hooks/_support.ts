// Shared by the hook integration tests: a silent or recording logger, and a hook served on 127.0.0.1.
import type { ExecutionContext } from 'ava';
import pino, { type Logger } from 'pino';
import { type ReplySink, startReplySink } from '../../../hooks/conformance/reply-sink.ts';
import { type HookServer, type ServeHookOptions, serveHook } from '../../../hooks/sdk/index.ts';
import { keys } from '../../support/keys.ts';

export const silent = pino({ level: 'silent' });

/** A logger whose lines the test can read. */
export function recordingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

export async function hookFor(t: ExecutionContext, opts: Omit<ServeHookOptions, 'port' | 'host'>): Promise<HookServer> {
  const server = await serveHook({ port: 0, host: '127.0.0.1', sink: '', logger: silent, ...opts });
  t.teardown(() => server.close());
  return server;
}

/** The gate's side: a sink verifying replies with the key the test requests are signed with. */
export async function gateSink(t: ExecutionContext): Promise<ReplySink> {
  const sink = await startReplySink(keys);
  t.teardown(() => sink.close());
  return sink;
}

export function post(url: string, message: { headers: Record<string, string>; body: Uint8Array | string }): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: message.headers,
    body: typeof message.body === 'string' ? message.body : new Uint8Array(message.body),
  });
}
