// A binding hook: "provisions" a database for a new Revision, reporting progress on the way,
// stores the credentials in a Secret in the Revision's namespace, and hands the Revision that
// Secret, as env vars and as a mounted volume.
//
//   PORT=8080 node --import tsx examples/typescript-binding-hook/index.ts
//
// Environment: PORT (8080), HOST (0.0.0.0), HOOK_NAME (provision-db), PROVISION_MS (3000),
// STORE_SECRETS (default: true in a pod, false elsewhere).
// Params it reads from its PrestartHook: secretName (default demo-db), fail (true makes it fail).
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine as kubeErrorLine } from '../../api/kube-errors.ts';
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
} from '../../hooks/sdk/index.ts';
import { credentials, kubernetesSecrets, type SecretStore } from './secrets.ts';

export const HOOK_NAME = 'provision-db';
const STEPS = [
  'creating the database',
  'creating the user',
  'storing the credentials in a Secret',
  'waiting for the database to accept connections',
];

/**
 * The handler. Without a SecretStore (the simulator, the conformance checker, a laptop without a
 * cluster) it only names the Secret; with one it creates it before answering, so the Revision is
 * released only once its credentials exist.
 */
export function provisionDatabase(durationMs: number, secrets?: SecretStore): HookHandler {
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
    if (secrets) {
      const { namespace } = req.revision;
      try {
        const result = await secrets.ensure(namespace, secretName, credentials(database, namespace));
        ctx.logger.info({ namespace, secret: secretName, result }, 'credentials stored');
      } catch (err) {
        // RBAC or a bad namespace will not heal by itself: say so, the admin retries after fixing it.
        return fail(`${database}: cannot store the credentials in Secret ${namespace}/${secretName}: ${kubeErrorLine(err)}`);
      }
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
  /** Where replies go; default $K_SINK, else each request's replyTo. */
  sink?: string;
  /** Store the credentials (see provisionDatabase); default: from STORE_SECRETS and the environment. */
  secrets?: SecretStore;
}

/**
 * STORE_SECRETS=true/false decides; unset, only a pod (in-cluster service account) stores them:
 * on a laptop, running the checker or the simulator against the example must not write Secrets
 * into whatever cluster KUBECONFIG points at.
 */
export function secretsFromEnvironment(env: NodeJS.ProcessEnv = process.env): SecretStore | undefined {
  const wanted = env.STORE_SECRETS ?? (env.KUBERNETES_SERVICE_HOST ? 'true' : 'false');
  if (wanted !== 'true') return undefined;
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kubernetesSecrets(kc);
}

export function start(opts: StartOptions = {}): Promise<HookServer> {
  return serveHook({
    name: opts.name ?? process.env.HOOK_NAME ?? HOOK_NAME,
    handler: provisionDatabase(opts.durationMs ?? Number(process.env.PROVISION_MS ?? 3000), opts.secrets),
    port: opts.port ?? Number(process.env.PORT ?? 8080),
    host: opts.host ?? process.env.HOST ?? '0.0.0.0',
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(opts.sink !== undefined ? { sink: opts.sink } : {}),
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secrets = secretsFromEnvironment();
  const server = await start(secrets ? { secrets } : {});
  console.log(
    `hook "${process.env.HOOK_NAME ?? HOOK_NAME}" listening on ${server.url} (${secrets ? 'stores the credentials Secret' : 'STORE_SECRETS is off: names the Secret, does not create it'})`,
  );
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
