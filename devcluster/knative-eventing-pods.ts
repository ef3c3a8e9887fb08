// Knative Eventing as a user installs it, on a cluster with a real node (node.ts), beside Knative
// Serving's pods (knative-serving-pods.ts): the module's own release manifests (config/core,
// config/channels/in-memory-channel, config/brokers/mt-channel-broker: what eventing-core.yaml,
// in-memory-channel.yaml and mt-channel-broker.yaml are made from, copied by build-binaries.sh
// knative-eventing) applied as they ship, with only their `ko://knative.dev/eventing/cmd/<path>`
// image references resolved to images built here (build-binaries.sh knative-eventing-images).
//
// So Eventing's controller and webhook, the InMemoryChannel controller (with its webhook) and
// dispatcher, and the MT broker controller, ingress and filter run as pods; Eventing's webhooks
// register themselves by Service reference and default Brokers (class, channel config) and
// Triggers; every part finds the others by cluster DNS (CoreDNS on the node) and Services (kube-
// proxy). Unlike knative-eventing.ts (host processes): no DNS stand-in proxy, no network namespace
// of ours, no RBAC added.
//
// Not run (not built, not applied): the core Deployments a Broker does not use (job-sink,
// request-reply, pingsource-mt-adapter). The eventing controller's env names two images it gives
// to pods of features not run here (the ApiServerSource adapter, the OIDC auth proxy): they resolve
// to dev.local names the node does not have, so such a pod would not start. The manifests' HPAs are
// applied, and nothing acts on them (no HPA controller on this control plane).
//
// The pods run unchanged: start the cluster without kwok nodes and the node untainted, as for
// Serving's pods.
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { applyManifests } from './apply.ts';
import { cacheDir, pinnedVersions } from './binaries.ts';
import type { Cluster } from './control-plane.ts';
import { ClusterStartError } from './errors.ts';
import { installOrClean, type KoImage, koBuildOutput, koResolve, releaseManifests, waitForKnativeReady } from './knative-pods.ts';
import { kubeRequest } from './kube-request.ts';
import type { RealNode } from './node.ts';
import { waitFor } from './wait.ts';

export const EVENTING_NAMESPACE = 'knative-eventing';
/** The `cmd/` paths build-binaries.sh knative-eventing-images builds (its KNATIVE_EVENTING_IMAGES). */
export const EVENTING_IMAGES = [
  'controller',
  'webhook',
  'mtchannel_broker',
  'broker/ingress',
  'broker/filter',
  'in_memory/channel_controller',
  'in_memory/channel_dispatcher',
] as const;
/** The Deployments that run from them. */
export const EVENTING_DEPLOYMENTS = [
  'eventing-controller',
  'eventing-webhook',
  'imc-controller',
  'imc-dispatcher',
  'mt-broker-controller',
  'mt-broker-ingress',
  'mt-broker-filter',
] as const;

const WEBHOOK_CONFIGURATIONS = [
  ['mutatingwebhookconfigurations', 'webhook.eventing.knative.dev'],
  ['validatingwebhookconfigurations', 'validation.webhook.eventing.knative.dev'],
  ['validatingwebhookconfigurations', 'config.webhook.eventing.knative.dev'],
  ['mutatingwebhookconfigurations', 'sinkbindings.webhook.sources.knative.dev'],
  ['mutatingwebhookconfigurations', 'inmemorychannel.eventing.knative.dev'],
  ['validatingwebhookconfigurations', 'validation.inmemorychannel.eventing.knative.dev'],
] as const;

export interface KnativeEventingPods {
  /** The image each `ko://knative.dev/eventing/cmd/<path>` was resolved to. */
  images: Record<string, string>;
  /** Seconds from the start to every Deployment available and the webhook defaulting through its Service. */
  startSeconds: number;
  /** A Broker's address as every pod reaches it (cluster DNS): what Eventing writes into its status. */
  ingressUrl(namespace: string, broker: string): string;
  /** Creates a Broker as a user writes it (Eventing's webhook defaults its class and channel) and waits until it is Ready. */
  createBroker(namespace: string, name: string, timeoutMs?: number): Promise<void>;
  /** Deletes Eventing's webhook configurations (they fail closed); the pods go with the node. */
  stop(): Promise<void>;
}

export interface StartKnativeEventingPodsOptions {
  /** Deadline for the start; default 180 s. */
  timeoutMs?: number;
  progress?: (line: string) => void;
}

interface EventingRelease {
  version: string;
  config: string;
  images: KoImage[];
}

/** The manifests and the images built by build-binaries.sh (knative-eventing, knative-eventing-images). */
export function eventingRelease(): EventingRelease {
  const version = pinnedVersions().KNATIVE_EVENTING_VERSION;
  if (!version) throw new ClusterStartError('devcluster/versions.env has no KNATIVE_EVENTING_VERSION');
  const dir = join(cacheDir(), 'bin', `knative-eventing-${version}`);
  const config = join(dir, 'config');
  const needed = [
    join(config, 'core', 'deployments'),
    join(config, 'channels', 'in-memory-channel'),
    join(config, 'brokers', 'mt-channel-broker'),
  ];
  return { version, config, images: koBuildOutput(dir, EVENTING_IMAGES, needed, 'knative-eventing') };
}

/** The steps of the install, in the order of the release files, each after what it needs. */
function installSteps(config: string): { before: string[][]; webhooks: string[] } {
  const core = join(config, 'core');
  const imc = join(config, 'channels', 'in-memory-channel');
  const broker = join(config, 'brokers', 'mt-channel-broker');
  const sa = ['eventing', 'job-sink', 'pingsource-mt-adapter', 'request-reply', 'webhook'].map((n) =>
    join(core, `200-${n}-serviceaccount.yaml`),
  );
  return {
    // Each webhook configuration comes once the Deployment serving it exists (they fail closed: a
    // ConfigMap or channel applied while no webhook pod answers would be refused).
    before: [
      [join(core, '100-namespace.yaml')],
      [...sa, join(imc, '200-imc-controller-serviceaccount.yaml'), join(imc, '200-imc-dispatcher-serviceaccount.yaml')],
      [join(core, 'roles'), join(imc, 'roles'), join(broker, 'roles')],
      [join(core, 'resources'), join(imc, 'resources')],
      // The release's core carries the image names of eventing-integrations too (symlinks in the
      // repository into third_party/, copied by build-binaries.sh): the controller's env reads them.
      [join(core, 'configmaps'), join(config, 'third_party', 'eventing-integrations-latest'), join(imc, 'configmaps')],
      [
        join(core, 'webhooks', 'secret.yaml'),
        join(imc, 'webhooks', 'secret.yaml'),
        ...['controller', 'webhook', 'webhook-hpa'].map((n) => join(core, 'deployments', `${n}.yaml`)),
        join(imc, 'deployments'),
        join(broker, 'deployments'),
      ],
    ],
    webhooks: [
      ...['defaulting', 'resource-validation', 'config-validation', 'sinkbindings'].map((n) => join(core, 'webhooks', `${n}.yaml`)),
      ...['defaulting', 'resource-validation'].map((n) => join(imc, 'webhooks', `${n}.yaml`)),
    ],
  };
}

/** Whether Eventing's webhook answers through its Service: a dry-run Broker comes back with its class defaulted. */
async function webhookDefaultsBroker(admin: KubeConfig): Promise<boolean> {
  const res = await kubeRequest(admin, 'POST', '/apis/eventing.knative.dev/v1/namespaces/default/brokers?dryRun=All', {
    apiVersion: 'eventing.knative.dev/v1',
    kind: 'Broker',
    metadata: { name: 'webhook-probe' },
  });
  if (res.status !== 201 && res.status !== 200) throw new Error(`HTTP ${res.status}`);
  const broker = res.body as { metadata?: { annotations?: Record<string, string> } };
  return broker.metadata?.annotations?.['eventing.knative.dev/broker.class'] !== undefined;
}

async function deleteWebhookConfigurations(kc: KubeConfig): Promise<void> {
  await Promise.all(
    WEBHOOK_CONFIGURATIONS.map(([plural, name]) =>
      kubeRequest(kc, 'DELETE', `/apis/admissionregistration.k8s.io/v1/${plural}/${name}`).catch(() => undefined),
    ),
  );
}

async function createBroker(admin: KubeConfig, namespace: string, name: string, timeoutMs: number): Promise<void> {
  await applyManifests(admin, JSON.stringify({ apiVersion: 'eventing.knative.dev/v1', kind: 'Broker', metadata: { name, namespace } }));
  await waitFor(
    async () => {
      const res = await kubeRequest(admin, 'GET', `/apis/eventing.knative.dev/v1/namespaces/${namespace}/brokers/${name}`);
      const conditions = (res.body as { status?: { conditions?: { type: string; status: string; message?: string }[] } }).status
        ?.conditions;
      if (conditions?.find((c) => c.type === 'Ready')?.status === 'True') return true;
      throw new Error(
        `Broker ${namespace}/${name}: ${conditions?.map((c) => `${c.type}=${c.status}${c.message ? ` (${c.message})` : ''}`).join(', ') ?? 'no status yet'}`,
      );
    },
    { what: `Broker ${namespace}/${name} to be Ready`, timeoutMs },
  );
}

export async function startKnativeEventingPods(
  cluster: Cluster,
  node: RealNode,
  opts: StartKnativeEventingPodsOptions = {},
): Promise<KnativeEventingPods> {
  const started = performance.now();
  const progress = opts.progress ?? (() => {});
  const deadline = Date.now() + (opts.timeoutMs ?? 180_000);
  const left = () => Math.max(deadline - Date.now(), 1);
  const elapsed = () => ((performance.now() - started) / 1000).toFixed(1);
  const release = eventingRelease();
  const images = Object.fromEntries(release.images.map((i) => [i.name, i.ref]));
  // Named in the controller's env for features not run here: images the node does not have.
  const unbuilt = Object.fromEntries(
    ['apiserver_receive_adapter', 'auth_proxy'].map((n) => [n, `dev.local/knative/eventing/${n}:${release.version}-not-built`]),
  );
  const resolve = (text: string) => koResolve(text, 'knative.dev/eventing', images, unbuilt);
  const admin = cluster.kubeConfig;

  await node.importImages(release.images);
  progress(`Knative Eventing's images imported into the node after ${elapsed()}s`);
  const steps = installSteps(release.config);
  await installOrClean(
    'knative-eventing',
    node,
    () => deleteWebhookConfigurations(admin),
    async () => {
      for (const paths of steps.before) await applyManifests(admin, releaseManifests(paths, resolve), { timeoutMs: left() });
      await applyManifests(admin, releaseManifests(steps.webhooks, resolve), { timeoutMs: left() });
      progress(`Knative Eventing's release manifests applied after ${elapsed()}s`);
      const check = () => webhookDefaultsBroker(admin);
      await waitForKnativeReady(
        admin,
        EVENTING_NAMESPACE,
        EVENTING_DEPLOYMENTS,
        { what: "Knative Eventing's webhook (through its Service) to default a dry-run Broker", check },
        left,
      );
    },
  );
  const startSeconds = (performance.now() - started) / 1000;
  progress(`Knative Eventing (pods) ready after ${startSeconds.toFixed(1)}s`);
  let stopped: Promise<void> | undefined;
  return {
    images,
    startSeconds,
    ingressUrl: (namespace, broker) => `http://broker-ingress.${EVENTING_NAMESPACE}.svc.cluster.local/${namespace}/${broker}`,
    createBroker: (namespace, name, timeoutMs = 60_000) => createBroker(admin, namespace, name, timeoutMs),
    stop: () => {
      stopped ??= deleteWebhookConfigurations(admin);
      return stopped;
    },
  };
}
