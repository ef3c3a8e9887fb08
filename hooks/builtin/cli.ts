// `knative-prestart hook <job|secret|approval>` serves a built-in hook; `knative-prestart
// approve|reject` records a decision for the approval hook.
import { Argument, type Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import { seconds } from '../cli-args.ts';
import type { HookServer } from '../sdk/http.ts';
import { type ApprovalVerdict, ApproveError, approveRevision, serveApprovalHook } from './approval/index.ts';
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

interface DecideFlags {
  namespace?: string;
  reject?: boolean;
  message?: string;
  reason?: string;
  kubeconfig?: string;
}

const DECISION_HELP = `
Each person decides once, and a decision is final. Who you are (username and groups) is what the
apiserver authenticates, never what the kubeconfig says; the apiserver's policy
(config/610-approval-policy.yaml) refuses a decision from anyone without the grant, in another's
name, a second decision by the same person, and an approval by the Revision's author
(serving.knative.dev/creator). The approval hook counts the approvals its PrestartHook asks for
(params: approvals, approvers, approverGroups, approverServiceAccounts, requiredApprovers,
requiredServiceAccounts); one rejection it counts fails it with the rejecter's message.
See who decided what: kn prestart why <revision>.`;

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

  const decide = (verdictOf: (o: DecideFlags) => ApprovalVerdict) => async (revision: string, o: DecideFlags) => {
    const verdict = verdictOf(o);
    const message = o.message ?? o.reason;
    if (verdict === 'rejected' && !message?.trim()) {
      io.out('error: say why with --message TEXT: a rejection fails the hook with it, and it is final');
      io.setExitCode(1);
      return;
    }
    const kubeConfig = loadKubeConfig(o.kubeconfig);
    const namespace = o.namespace ?? kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace ?? 'default';
    try {
      const result = await approveRevision({ kubeConfig, namespace, revision, verdict, ...(message !== undefined ? { message } : {}) });
      io.out(`Revision ${namespace}/${revision} ${verdict} by ${result.user}`);
      if (result.hint) io.out(`note: ${result.hint}`);
    } catch (err) {
      if (!(err instanceof ApproveError)) throw err;
      io.out(`error: ${err.message}`);
      io.setExitCode(1);
    }
  };
  const decisionCommand = (name: string, description: string) =>
    program
      .command(name)
      .description(description)
      .argument('<revision>', 'the Revision, e.g. checkout-00002')
      .option('-n, --namespace <ns>', "the Revision's namespace (default: the kubeconfig context's, else default)")
      .option('-m, --message <text>', 'why; recorded with your decision, shown in the PrestartRun, its Events and kn prestart why')
      .addOption(new Option('--reason <text>', 'the same as --message').hideHelp())
      .option('--kubeconfig <path>', 'who decides (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
      .addHelpText('after', DECISION_HELP);

  decisionCommand('approve', 'approve a Revision held by an approval hook, as the user of your kubeconfig (or --reject it)')
    .option('--reject', 'reject it instead (the same as knative-prestart reject)')
    .action(decide((o) => (o.reject ? 'rejected' : 'approved')));
  decisionCommand(
    'reject',
    'reject a Revision held by an approval hook, as the user of your kubeconfig: the hook fails with your message',
  ).action(decide(() => 'rejected'));
}
