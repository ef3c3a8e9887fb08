// `knative-prestart hook <job|secret|approval>` serves a built-in hook; `knative-prestart
// approve` records a decision for the approval hook.
import { Argument, type Command, InvalidArgumentError } from 'commander';
import pino from 'pino';
import { seconds } from '../cli-args.ts';
import type { HookServer } from '../sdk/http.ts';
import { ApproveError, approveRevision, serveApprovalHook } from './approval/index.ts';
import { loadKubeConfig } from './common/kube.ts';
import type { BuiltinKind, ServeBuiltinOptions } from './common/serve.ts';
import { serveJobHook } from './job/index.ts';
import { serveSecretHook } from './secret/index.ts';

/** Where the commands write and how they report failure (the same shape as hooks/cli.ts's CliIo). */
export interface BuiltinCliIo {
  out(text: string): void;
  setExitCode(code: number): void;
}

const SERVE: Record<BuiltinKind, (opts: ServeBuiltinOptions) => Promise<HookServer>> = {
  job: serveJobHook,
  secret: serveSecretHook,
  approval: serveApprovalHook,
};

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`"${value}" is not a port`);
  return n;
}

interface HookFlags {
  name?: string;
  kubeconfig?: string;
  port?: number;
  host: string;
  sink?: string;
  pollMax: number;
  logLevel: string;
}

interface ApproveFlags {
  namespace?: string;
  reject?: boolean;
  reason?: string;
  kubeconfig?: string;
}

export function registerBuiltinCommands(program: Command, io: BuiltinCliIo): void {
  program
    .command('hook')
    .description(
      'serve a built-in hook: job (run a Job per Revision), secret (wait for a Secret and bind it), approval (wait for a person)',
    )
    .addArgument(new Argument('<kind>', 'which hook').choices(Object.keys(SERVE)))
    .option('--name <hook>', 'serve only this PrestartHook (default: any that delivers here)')
    .option('--kubeconfig <path>', "the hook's identity (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    .option('--port <port>', 'port to listen on (default: $PORT, else 8080; 0 picks one)', port)
    .option('--host <host>', 'address to listen on', '0.0.0.0')
    .option('--sink <url>', "where replies go (default: $K_SINK, else each request's replyTo)")
    .option('--poll-max <seconds>', 'longest pause between two looks at the cluster', seconds, 5)
    .option('--log-level <level>', 'pino log level', process.env.LOG_LEVEL ?? 'info')
    .action(async (kind: BuiltinKind, o: HookFlags) => {
      const server = await SERVE[kind]({
        kubeConfig: loadKubeConfig(o.kubeconfig),
        pollMaxMs: o.pollMax * 1000,
        logger: pino({ name: `prestart-hook-${kind}`, level: o.logLevel }),
        host: o.host,
        ...(o.name !== undefined ? { name: o.name } : {}),
        ...(o.port !== undefined ? { port: o.port } : {}),
        ...(o.sink !== undefined ? { sink: o.sink } : {}),
      });
      io.out(`hook ${kind} listening on ${server.url}, serving ${o.name ? `PrestartHook ${o.name}` : 'any PrestartHook'}`);
      const stop = () => void server.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });

  program
    .command('approve')
    .description('approve (or --reject) a Revision held by an approval hook, as the user of your kubeconfig')
    .argument('<revision>', 'the Revision, e.g. checkout-00002')
    .option('-n, --namespace <ns>', "the Revision's namespace (default: the kubeconfig context's, else default)")
    .option('--reject', 'reject it instead: the Revision stays held')
    .option('--reason <text>', 'why; shown in the PrestartRun')
    .option('--kubeconfig <path>', 'who approves (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
    .action(async (revision: string, o: ApproveFlags) => {
      const kubeConfig = loadKubeConfig(o.kubeconfig);
      const namespace = o.namespace ?? kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace ?? 'default';
      const verdict = o.reject ? 'rejected' : 'approved';
      try {
        const result = await approveRevision({
          kubeConfig,
          namespace,
          revision,
          verdict,
          ...(o.reason !== undefined ? { reason: o.reason } : {}),
        });
        io.out(`Revision ${namespace}/${revision} ${verdict} by ${result.user}`);
        if (result.hint) io.out(`note: ${result.hint}`);
      } catch (err) {
        if (!(err instanceof ApproveError)) throw err;
        io.out(`error: ${err.message}`);
        io.setExitCode(1);
      }
    });
}
