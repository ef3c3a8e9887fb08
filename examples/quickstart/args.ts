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
  /** Where the pods run: the real node (real containers), kwok's fake nodes, or the real node where the machine allows. */
  node: NodeChoice;
}

export const NODE_CHOICES = ['auto', 'real', 'kwok'] as const;
export type NodeChoice = (typeof NODE_CHOICES)[number];

export const DEFAULT_TIMEOUT_MS = 5 * 60_000;
export const DEFAULT_PROVISION_MS = 8_000;

export const USAGE = `usage: npm run quickstart [-- [--node auto|real|kwok] [--broker] [--exit-when-done] [--timeout <seconds>] [--provision-ms <ms>]]

  --node <where>        real: a real node (kubelet, containerd, CNI, CoreDNS) runs Knative and the app as
                        pods, and the app answers a real HTTP request; needs root and the packages of
                        scripts/system-deps.sh. kwok: fake nodes, pods Ready without containers.
                        auto (default): real where the machine allows, else kwok, saying why in one line.
                        --broker runs on kwok (also: QUICKSTART_NODE)
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

/** The choice, or an error line. */
function nodeChoice(flag: string, raw: string | undefined): NodeChoice | string {
  return NODE_CHOICES.includes(raw as NodeChoice)
    ? (raw as NodeChoice)
    : `${flag} is one of ${NODE_CHOICES.join(', ')}, got ${raw === undefined ? 'nothing' : JSON.stringify(raw)}`;
}

export function parseArgs(argv: readonly string[], env: NodeJS.ProcessEnv): ParsedArgs {
  const options: QuickstartOptions = {
    exitWhenDone: env.QUICKSTART_EXIT_WHEN_DONE === '1' || env.QUICKSTART_EXIT_WHEN_DONE === 'true',
    timeoutMs: DEFAULT_TIMEOUT_MS,
    provisionMs: DEFAULT_PROVISION_MS,
    broker: env.QUICKSTART_BROKER === '1' || env.QUICKSTART_BROKER === 'true',
    node: 'auto',
  };
  if (env.QUICKSTART_NODE) {
    const n = nodeChoice('QUICKSTART_NODE', env.QUICKSTART_NODE);
    if (!NODE_CHOICES.includes(n as NodeChoice)) return { ok: false, help: false, error: n };
    options.node = n as NodeChoice;
  }
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
      case '--node': {
        const n = nodeChoice(flag, value());
        if (!NODE_CHOICES.includes(n as NodeChoice)) return { ok: false, help: false, error: n };
        options.node = n as NodeChoice;
        break;
      }
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
