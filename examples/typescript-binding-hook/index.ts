// A binding hook: "provisions" a database for a new Revision, reporting progress on the way, and
// hands the Revision the Secret with the credentials, as env vars and as a mounted volume.
//
//   PORT=8080 node --import tsx examples/typescript-binding-hook/index.ts
//
// Environment: PORT (8080), HOST (0.0.0.0), HOOK_NAME (provision-db), PROVISION_MS (3000).
// Params it reads from its PrestartHook: secretName (default demo-db), fail (true makes it fail).
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import {
  allowedOnly,
  envContribution,
  fail,
  type HookHandler,
  type HookServer,
  isDns1123Subdomain,
  serveHook,
  succeed,
  volumeContribution,
} from '../../hooks/index.ts';

export const HOOK_NAME = 'provision-db';
const STEPS = [
  'creating the database',
  'creating the user',
  'storing the credentials in a Secret',
  'waiting for the database to accept connections',
];

export function provisionDatabase(durationMs: number): HookHandler {
  return async (req, ctx) => {
    const secretName = req.params.secretName ?? 'demo-db';
    if (typeof secretName !== 'string' || !isDns1123Subdomain(secretName)) {
      return fail(`params.secretName must be a Secret name (a DNS-1123 subdomain), got ${JSON.stringify(secretName)}`);
    }
    const database = req.revision.service ?? req.revision.name;
    for (const [i, step] of STEPS.entries()) {
      await ctx.progress(Math.round((i * 100) / STEPS.length), `${database}: ${step}`);
      // Rejects when the gate cancels or the deadline passes: the SDK then sends nothing.
      await sleep(durationMs / STEPS.length, undefined, { signal: ctx.signal });
      if (req.params.fail === true && i === 1) return fail(`${database}: the database server refused to create user "app"`);
    }
    return succeed(
      `database ${database} ready; credentials in Secret ${secretName}`,
      allowedOnly(req, [
        envContribution('db-env', secretName, { DATABASE_URL: 'uri', DATABASE_PASSWORD: 'password' }),
        volumeContribution('db', secretName),
      ]),
    );
  };
}

export interface StartOptions {
  port?: number;
  host?: string;
  name?: string;
  durationMs?: number;
  logger?: Logger;
}

export function start(opts: StartOptions = {}): Promise<HookServer> {
  return serveHook({
    name: opts.name ?? process.env.HOOK_NAME ?? HOOK_NAME,
    handler: provisionDatabase(opts.durationMs ?? Number(process.env.PROVISION_MS ?? 3000)),
    port: opts.port ?? Number(process.env.PORT ?? 8080),
    host: opts.host ?? process.env.HOST ?? '0.0.0.0',
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = await start();
  console.log(`hook "${process.env.HOOK_NAME ?? HOOK_NAME}" listening on ${server.url}`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
