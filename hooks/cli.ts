// `knative-prestart conformance` and `knative-prestart simulate`: the hook author's commands;
// `knative-prestart hook` and `knative-prestart approve`: the built-in hooks'.
import type { Command } from 'commander';
import { registerBuiltinCommands } from './builtin/cli.ts';
import { keyText, keyValue, kinds, seconds } from './cli-args.ts';
import { DEFAULT_CONFORMANCE_HOOK, formatReport, runConformance } from './conformance/index.ts';
import { DEFAULT_SIMULATED_HOOK, describeReplyLive, formatExchange, formatVerdict, simulate } from './simulator/index.ts';

/** Where the commands write and how they report failure; tests pass their own. */
export interface CliIo {
  out(text: string): void;
  setExitCode(code: number): void;
}

const processIo: CliIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

export function registerHookCommands(program: Command, io: CliIo = processIo): void {
  program
    .command('conformance')
    .description('check a running hook service against the prestart protocol (exit 1 on any failure)')
    .argument('<url>', 'where the hook service listens, e.g. http://127.0.0.1:8080')
    .option('--hook <name>', 'the hook name the service serves', DEFAULT_CONFORMANCE_HOOK)
    .option('--param <key=value>', 'a data.hook.params entry (repeatable)', keyValue, {})
    .option('--timeout <seconds>', 'how long to wait for a final reply', seconds, 30)
    .option('--json', 'print the report as JSON')
    .option('--verbose', 'print every check, not only failures and one line per rule')
    .option('--identity', 'sender identity is on: every reply posted to the sink must carry a bearer token (R10)')
    .option(
      '--retry-param <key=value>',
      'a data.hook.params entry that makes the hook answer retry (repeatable): the checker asks again as the gate would (R11)',
      keyValue,
    )
    .action(
      async (
        url: string,
        o: {
          hook: string;
          param: Record<string, unknown>;
          timeout: number;
          json?: boolean;
          verbose?: boolean;
          identity?: boolean;
          retryParam?: Record<string, unknown>;
        },
      ) => {
        const report = await runConformance(url, {
          hook: o.hook,
          params: o.param,
          timeoutMs: o.timeout * 1000,
          identity: o.identity ?? false,
          ...(o.retryParam ? { retryParams: o.retryParam } : {}),
        });
        io.out(o.json ? JSON.stringify(report, null, 2) : formatReport(report, { verbose: o.verbose ?? false }));
        io.setExitCode(report.passed ? 0 : 1);
      },
    );

  program
    .command('simulate')
    .description('send a realistic request for a made-up Revision and show what the gate would decide')
    .argument('<url>', 'where the hook service listens')
    .option('--hook <name>', 'the hook name', DEFAULT_SIMULATED_HOOK)
    .option('--param <key=value>', 'a data.hook.params entry (repeatable; values like true, 3 or {"a":1} are JSON)', keyValue, {})
    .option('--annotation <key=value>', 'an annotation on the Revision (repeatable)', keyText, {})
    .option('--allow <kinds>', 'contribution kinds the PrestartHook allows', kinds, ['env', 'envFrom', 'volume'])
    .option('--timeout <seconds>', 'how long to wait for a final reply', seconds, 60)
    .option('--json', 'print the result as JSON')
    .action(
      async (
        url: string,
        o: {
          hook: string;
          param: Record<string, unknown>;
          annotation: Record<string, string>;
          allow: ('env' | 'envFrom' | 'volume')[];
          timeout: number;
          json?: boolean;
        },
      ) => {
        const result = await simulate(url, {
          hook: o.hook,
          params: o.param,
          annotations: o.annotation,
          allowed: o.allow,
          timeoutMs: o.timeout * 1000,
          ...(o.json
            ? {}
            : {
                onAnswer: (request, answer) => io.out(formatExchange(url, request, answer)),
                onReply: (r) => io.out(describeReplyLive(r)),
              }),
        });
        if (o.json) {
          const { verdict, replies, answer } = result;
          io.out(
            JSON.stringify(
              {
                released: verdict.released,
                why: verdict.why,
                answer: { status: answer.status, ms: answer.ms, error: answer.error },
                replies: replies.map((r) => ({ via: r.via, reply: r.reply, error: r.error })),
                contributions: verdict.contributions,
                injected: verdict.injected,
                patch: verdict.patch,
              },
              null,
              2,
            ),
          );
        } else io.out(formatVerdict(result.verdict));
        io.setExitCode(verdict(result.verdict.released));
      },
    );

  registerBuiltinCommands(program, io);
}

// simulate exits 0 when the Revision would be released, 2 when it would stay held: scripts can tell.
function verdict(released: boolean): number {
  return released ? 0 : 2;
}
