#!/usr/bin/env node
// The knative-prestart command line: `gate` runs the gate; more subcommands join as features do.
//
// A process loads the modules of the command it runs: `knative-prestart gate` registers the gate
// alone and imports it when it starts; any other command line (help included) registers every
// command. The gate runs for months and its resident memory counts; the commands of
// hook authors and admins, and the built-in hooks, do not load the gate.
import { realpathSync } from 'node:fs';
import { hostname } from 'node:os';
import { pathToFileURL } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import { type ClusterVersions, judgeCluster } from '../api/compatibility.ts';
import { errorLine } from '../api/kube-errors.ts';
import { DEFAULTS, type GateConfig } from '../gate/config.ts';
import type { NatsSecurity, NatsTls } from '../schemas/nats-auth.ts';
import { GATE_INBOX_PREFIX, MAX_REPLICAS } from '../schemas/nats-names.ts';
import { DEFAULT_SINK_AUDIENCE, IDENTITY_MODES, type IdentityMode } from '../sinks/identity.ts';

function int(value: string): number {
  const n = Number.parseInt(value, 10);
  if (!Number.isInteger(n) || n < 0 || String(n) !== value.trim()) throw new InvalidArgumentError(`"${value}" is not a whole number`);
  return n;
}

/** JetStream keeps 1 to 5 copies of a stream; anything else would fail at the first stream create. */
function replicas(value: string): number {
  const n = int(value);
  if (n < 1 || n > MAX_REPLICAS) throw new InvalidArgumentError(`"${value}" is not a replica count from 1 to ${MAX_REPLICAS}`);
  return n;
}

/** A proxy URL that is wrong would fail every Broker delivery; better to refuse it at start. */
function proxyUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`"${value}" is not a URL (e.g. http://proxy.example:3128)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`"${value}" is not an http:// or https:// URL`);
  return value;
}

function identityMode(value: string): IdentityMode {
  if (!(IDENTITY_MODES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`"${value}" is not one of ${IDENTITY_MODES.join(', ')}`);
  return value as IdentityMode;
}

/** The command line for `argv` (process.argv's shape): every command, or `gate` alone when that is the one run. */
export async function buildCli(argv: readonly string[] = process.argv): Promise<Command> {
  const program = new Command('knative-prestart').description('Pre-start hooks for Knative Revisions');
  program
    .command('gate')
    .description('run the gate: admission webhooks, reply sinks and the Revision controller')
    .option('--kubeconfig <path>', 'kubeconfig to use (default: in-cluster, then $KUBECONFIG)')
    .option('--namespace <ns>', "namespace of the gate's lease and Secrets", DEFAULTS.namespace)
    .option('--instance <name>', 'name of this gate when several share a cluster', DEFAULTS.instance)
    .option('--namespace-selector <selector>', 'gate only namespaces matching this label selector')
    .option('--webhook-host <host>', 'address the admission webhooks listen on', '0.0.0.0')
    .option('--webhook-port <port>', 'port of the admission webhooks (https)', int, DEFAULTS.webhookPort)
    .option('--webhook-url <url>', 'URL the apiserver calls the webhooks at (out-of-cluster); default: the Service')
    .option('--service <ns/name:port>', 'Service in front of the webhooks', `${DEFAULTS.namespace}/knative-prestart-gate:443`)
    .option('--sink-host <host>', 'address the reply sink listens on', '0.0.0.0')
    .option('--sink-port <port>', 'port of the reply sink (http)', int, DEFAULTS.sinkPort)
    .option('--sink-url <url>', 'URL hooks send replies to (data.replyTo)')
    .option(
      '--trigger-reply-uri <url>',
      'keep Triggers for Broker hooks; the reply Trigger delivers to this URL (in cluster: http://knative-prestart-gate.knative-prestart.svc/)',
    )
    .option('--broker-proxy <url>', 'HTTP proxy for Broker delivery (default: HTTP_PROXY / HTTPS_PROXY / NO_PROXY)', proxyUrl)
    .option(
      '--broker-class <class>',
      'also send to Brokers of this class (repeatable); its controller must write the Broker status and give the audience Eventing gives (default: MTChannelBasedBroker, Kafka, KafkaNamespaced)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option('--nats <servers>', 'NATS servers for the JetStream transport, comma-separated, e.g. nats://nats-0:4222,nats://nats-1:4222')
    .option(
      '--nats-replicas <n>',
      'copies of the JetStream streams (their consumers follow), set both ways; default 3 on a clustered server (only ever raised), else 1',
      replicas,
    )
    // NATS secrets only by file (a mounted Secret): a value on the command line is readable in `ps` and the pod spec.
    .option('--nats-creds <file>', 'NATS .creds file (user JWT + nkey seed) for a server in operator mode')
    .option('--nats-nkey <file>', 'file holding the NATS user nkey seed (SU…)')
    .option('--nats-token-file <file>', 'file holding the NATS token')
    .option('--nats-user <name>', 'NATS user name (with --nats-password-file)')
    .option('--nats-password-file <file>', 'file holding the NATS password')
    .option('--nats-tls-ca <file>', "CA bundle (PEM) the NATS server's certificate must chain to; requires TLS")
    .option('--nats-tls-cert <file>', 'client certificate (PEM) for a NATS server that verifies clients')
    .option('--nats-tls-key <file>', 'key (PEM) of --nats-tls-cert')
    .option('--nats-tls-server-name <name>', "name the NATS server's certificate must carry, if not the URL's host")
    .option('--nats-inbox-prefix <prefix>', "the gate's NATS inbox; grant it subscribe on <prefix>.> only", GATE_INBOX_PREFIX)
    .option(
      '--reply-identity <mode>',
      "sender identity on the HTTP sink: off (replyid only), optional (a token, when sent, must be the hook's), declared (a hook that names its ServiceAccount, or whose Broker's reply Trigger has an OIDC identity, is answered only with that token), required (every reply needs its hook's ServiceAccount token)",
      identityMode,
      'off',
    )
    .option('--reply-audience <audience>', 'the audience reply tokens must be minted for (announced by the sink)', DEFAULT_SINK_AUDIENCE)
    .option(
      '--service-account <ns/name>',
      "the gate's own ServiceAccount, whose tokens go to hooks naming identity.audience",
      `${DEFAULTS.namespace}/knative-prestart-gate`,
    )
    .option('--binding-root <path>', 'where contributed volumes are mounted', DEFAULTS.bindingRoot)
    .option('--workers <n>', 'Revisions reconciled at once', int, DEFAULTS.workers)
    .option('--lease-duration <seconds>', "how long a dead leader's lease blocks a successor", int, 15)
    .option('--resync <seconds>', 'how often the leader reconciles every Revision again, events or not', int, DEFAULTS.resyncSeconds)
    .option(
      '--stamp-check <seconds>',
      'how often to look again at who stamps new Revisions (the apiserver or this webhook)',
      int,
      DEFAULTS.stampCheckSeconds,
    )
    .addOption(
      new Option(
        '--revision-webhook <when>',
        'register the Revision webhook where the apiserver stamps too (always), or only where it does not (auto)',
      )
        .choices(['auto', 'always'])
        .default('auto'),
    )
    .option(
      '--namespaced-hook-limit <n>',
      'NamespacedPrestartHooks one namespace may have; beyond it none of them runs and the Revisions they match are refused, saying why (at most 40)',
      int,
      20,
    )
    .option(
      '--cluster-domain <domain>',
      "the cluster's DNS domain: a NamespacedPrestartHook's Service is reached at <svc>.<ns>.svc.<domain>",
      'cluster.local',
    )
    .option('--drain-quiet <seconds>', 'on SIGTERM, serve until no request came for this long', int, DEFAULTS.drainQuietSeconds)
    .option('--drain-max <seconds>', 'on SIGTERM, serve at most this long', int, DEFAULTS.drainMaxSeconds)
    .option('--log-level <level>', 'pino log level', 'info')
    .option('--allow-unsupported-versions', 'start on a Kubernetes or Knative Serving outside the supported range (logged as a warning)')
    .action(async (opts: Record<string, string | number | boolean | undefined>) => {
      const log = pino({ name: 'knative-prestart-gate', level: String(opts.logLevel) });
      const kc = new KubeConfig();
      if (opts.kubeconfig) kc.loadFromFile(String(opts.kubeconfig));
      else kc.loadFromDefault();
      const { startGate } = await import('../gate/gate.ts');
      const clusterVersions = await checkCluster(kc, log, opts.allowUnsupportedVersions === true);
      const gate = await startGate({ ...toConfig(opts as Record<string, string | number | undefined>, kc), clusterVersions }, log);
      const shutdown = async (signal: string) => {
        log.info({ signal }, 'stopping');
        await gate.stop({ drain: { quietMs: Number(opts.drainQuiet) * 1000, maxMs: Number(opts.drainMax) * 1000 } });
        process.exit(0);
      };
      process.once('SIGINT', () => void shutdown('SIGINT'));
      process.once('SIGTERM', () => void shutdown('SIGTERM'));
    });
  if (argv[2] === 'gate') return program;
  const [{ registerTriggersCommand }, { registerHookCommands }, { registerUninstallCommand }, { registerPrestartCommands }] =
    await Promise.all([
      import('../triggers/cli.ts'),
      import('../hooks/cli.ts'),
      import('./uninstall.ts'),
      import('./prestart/commands.ts'),
    ]);
  registerTriggersCommand(program);
  registerHookCommands(program);
  registerUninstallCommand(program);
  registerPrestartCommands(program);
  return program;
}

/**
 * Reads where the gate runs and refuses, with one line, a cluster outside the supported range
 * unless the admin allows it. An apiserver that cannot be read yet is logged and left to the gate,
 * which holds everything until its caches sync.
 */
async function checkCluster(kc: KubeConfig, log: pino.Logger, allowUnsupported: boolean): Promise<ClusterVersions | undefined> {
  const { readClusterVersions } = await import('../gate/kube/cluster-versions.ts');
  let versions: ClusterVersions;
  try {
    versions = await readClusterVersions(kc);
  } catch (err) {
    log.warn({ err: errorLine(err) }, 'could not read the apiserver version; the supported range is not checked');
    return undefined;
  }
  log.info({ kubernetes: versions.kubernetes, knativeServing: versions.knativeServing ?? 'unknown' }, 'cluster versions');
  const verdict = judgeCluster(versions);
  if (!verdict.supported) {
    if (!allowUnsupported) {
      process.stderr.write(`knative-prestart gate: ${verdict.reason}; --allow-unsupported-versions starts anyway\n`);
      process.exit(2);
    }
    log.warn(`${verdict.reason}; starting anyway (--allow-unsupported-versions)`);
  } else if (verdict.warning) log.warn(verdict.warning);
  return versions;
}

function toConfig(o: Record<string, string | number | undefined>, kc: KubeConfig): GateConfig {
  const service = /^([^/]+)\/([^:]+):(\d+)$/.exec(String(o.service));
  if (!o.webhookUrl && !service) throw new InvalidArgumentError(`--service must look like ns/name:port, got "${o.service}"`);
  return {
    kubeConfig: kc,
    namespace: String(o.namespace),
    instance: String(o.instance),
    identity: `${hostname()}-${process.pid}`,
    namespaceSelector: o.namespaceSelector === undefined ? undefined : String(o.namespaceSelector),
    webhook: {
      host: String(o.webhookHost),
      port: Number(o.webhookPort),
      urlBase: o.webhookUrl === undefined ? undefined : String(o.webhookUrl),
      service: service ? { namespace: service[1] ?? '', name: service[2] ?? '', port: Number(service[3]) } : undefined,
      bindingRoot: String(o.bindingRoot),
    },
    sink: {
      host: String(o.sinkHost),
      port: Number(o.sinkPort),
      publicUrl: o.sinkUrl === undefined ? undefined : String(o.sinkUrl),
      maxBytes: DEFAULTS.maxReplyBytes,
    },
    source: DEFAULTS.source,
    nats: natsConfig(o),
    triggers: o.triggerReplyUri === undefined ? undefined : { replyUri: String(o.triggerReplyUri) },
    broker:
      o.brokerProxy === undefined && o.brokerClass === undefined
        ? undefined
        : {
            ...(o.brokerProxy === undefined ? {} : { proxy: String(o.brokerProxy) }),
            ...(o.brokerClass === undefined ? {} : { classes: o.brokerClass as unknown as string[] }),
          },
    ...identityConfig(o),
    workers: Number(o.workers),
    leaseSeconds: Number(o.leaseDuration),
    resyncSeconds: Number(o.resync),
    stampCheckSeconds: Number(o.stampCheck),
    revisionWebhook: o.revisionWebhook === 'always' ? 'always' : 'auto',
    namespacedHooks: { limit: namespacedHookLimit(Number(o.namespacedHookLimit)), clusterDomain: String(o.clusterDomain) },
  };
}

/** A run holds at most 64 hooks (the PrestartRun CRD): a namespace's share leaves room for the admin's. */
function namespacedHookLimit(n: number): number {
  if (n < 1 || n > 40) throw new InvalidArgumentError(`--namespaced-hook-limit must be 1 to 40, got ${n}`);
  return n;
}

/** Sender identity: nothing in the config for the defaults, so a gate run without the flags is configured exactly as before. */
function identityConfig(o: Record<string, string | number | undefined>): Pick<GateConfig, 'senderIdentity' | 'serviceAccount'> {
  const sa = /^([^/]+)\/([^/]+)$/.exec(String(o.serviceAccount ?? ''));
  if (!sa) throw new InvalidArgumentError(`--service-account must look like ns/name, got "${o.serviceAccount}"`);
  const mode = (o.replyIdentity ?? 'off') as IdentityMode;
  return {
    serviceAccount: { namespace: sa[1] ?? '', name: sa[2] ?? '' },
    ...(mode === 'off' ? {} : { senderIdentity: { replies: mode, audience: String(o.replyAudience ?? DEFAULT_SINK_AUDIENCE) } }),
  };
}

/** Flags that mean something only with --nats: given without it, they are refused rather than ignored. */
const NATS_ONLY_FLAGS = {
  natsCreds: '--nats-creds',
  natsNkey: '--nats-nkey',
  natsTokenFile: '--nats-token-file',
  natsUser: '--nats-user',
  natsPasswordFile: '--nats-password-file',
  natsTlsCa: '--nats-tls-ca',
  natsTlsCert: '--nats-tls-cert',
  natsTlsKey: '--nats-tls-key',
  natsTlsServerName: '--nats-tls-server-name',
  natsReplicas: '--nats-replicas',
} as const;

function natsConfig(o: Record<string, string | number | undefined>): GateConfig['nats'] {
  if (o.nats === undefined) {
    const given = Object.entries(NATS_ONLY_FLAGS).find(([key]) => o[key] !== undefined);
    if (given) throw new InvalidArgumentError(`${given[1]} needs --nats`);
    return undefined;
  }
  const tls: NatsTls = {};
  if (o.natsTlsCa !== undefined) tls.caFile = String(o.natsTlsCa);
  if (o.natsTlsCert !== undefined) tls.certFile = String(o.natsTlsCert);
  if (o.natsTlsKey !== undefined) tls.keyFile = String(o.natsTlsKey);
  if (o.natsTlsServerName !== undefined) tls.serverName = String(o.natsTlsServerName);
  const security: NatsSecurity = { inboxPrefix: String(o.natsInboxPrefix ?? GATE_INBOX_PREFIX) };
  if (o.natsCreds !== undefined) security.credsFile = String(o.natsCreds);
  if (o.natsNkey !== undefined) security.nkeyFile = String(o.natsNkey);
  if (o.natsTokenFile !== undefined) security.tokenFile = String(o.natsTokenFile);
  if (o.natsUser !== undefined) security.user = String(o.natsUser);
  if (o.natsPasswordFile !== undefined) security.passwordFile = String(o.natsPasswordFile);
  if (Object.keys(tls).length > 0) security.tls = tls;
  return { servers: String(o.nats), security, ...(o.natsReplicas === undefined ? {} : { replicas: Number(o.natsReplicas) }) };
}

/** True when this file is the program being run, also through a symlink (npm's bin, kn-prestart) or a path with spaces. */
function isMain(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  buildCli(process.argv)
    .then((program) => program.parseAsync(process.argv))
    .catch((err: unknown) => {
      console.error(`knative-prestart: ${errorLine(err)}`);
      process.exit(1);
    });
}
