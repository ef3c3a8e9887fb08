// The quickstart's few settings, from its command line and environment. Unknown flags are an
// error rather than silently ignored: a typo in --exit-when-done would otherwise leave a CI job
// waiting for a Ctrl-C that never comes.

export interface QuickstartOptions {
  /** Exit 0 once the demo completes, non-zero on failure or timeout, instead of running until Ctrl-C. */
  exitWhenDone: boolean;
  /** How long everything after the binaries may take before the quickstart gives up. */
  timeoutMs: number;
  /** How long the example hook's fake provisioning takes (four steps, progress after each). */
  provisionMs: number;
  /** Deliver through Knative Eventing's Broker and the gate's Triggers instead of direct HTTP. */
  broker: boolean;
}

export const DEFAULT_TIMEOUT_MS = 5 * 60_000;
export const DEFAULT_PROVISION_MS = 8_000;

export const USAGE = `usage: npm run quickstart [-- [--broker] [--exit-when-done] [--timeout <seconds>] [--provision-ms <ms>]]

  --broker              the hook bus: requests and replies go through Knative Eventing's Broker and the
                        Triggers the gate keeps, instead of direct HTTP (also: QUICKSTART_BROKER=1;
                        needs root or CAP_NET_ADMIN for the channel dispatcher's network namespace)
  --exit-when-done      exit 0 once the Service is Ready with the binding on its pods, non-zero with
                        one line saying why on failure or timeout (also: QUICKSTART_EXIT_WHEN_DONE=1)
  --timeout <seconds>   give up this long after the binaries are ready (default ${DEFAULT_TIMEOUT_MS / 1000})
  --provision-ms <ms>   how long the example hook's fake provisioning takes (default ${DEFAULT_PROVISION_MS})`;

export type ParsedArgs = { ok: true; options: QuickstartOptions } | { ok: false; help: boolean; error?: string };

function positiveNumber(flag: string, raw: string | undefined): number | string {
  const n = raw === undefined ? Number.NaN : Number(raw);
  return Number.isFinite(n) && n > 0 ? n : `${flag} needs a positive number, got ${raw === undefined ? 'nothing' : JSON.stringify(raw)}`;
}

export function parseArgs(argv: readonly string[], env: NodeJS.ProcessEnv): ParsedArgs {
  const options: QuickstartOptions = {
    exitWhenDone: env.QUICKSTART_EXIT_WHEN_DONE === '1' || env.QUICKSTART_EXIT_WHEN_DONE === 'true',
    timeoutMs: DEFAULT_TIMEOUT_MS,
    provisionMs: DEFAULT_PROVISION_MS,
    broker: env.QUICKSTART_BROKER === '1' || env.QUICKSTART_BROKER === 'true',
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [flag, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => (inline !== undefined ? inline : argv[++i]);
    switch (flag) {
      case '--exit-when-done':
        options.exitWhenDone = true;
        break;
      case '--broker':
        options.broker = true;
        break;
      case '--timeout': {
        const n = positiveNumber(flag, value());
        if (typeof n === 'string') return { ok: false, help: false, error: n };
        options.timeoutMs = n * 1000;
        break;
      }
      case '--provision-ms': {
        const n = positiveNumber(flag, value());
        if (typeof n === 'string') return { ok: false, help: false, error: n };
        options.provisionMs = n;
        break;
      }
      case '-h':
      case '--help':
        return { ok: false, help: true };
      default:
        return { ok: false, help: false, error: `unknown argument ${JSON.stringify(arg)}` };
    }
  }
  return { ok: true, options };
}
