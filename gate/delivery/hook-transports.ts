// The transports requests go out on (direct HTTP, Knative Broker, NATS JetStream), with the
// gate's own ServiceAccount token for the hooks and Brokers that ask for one.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { createTransports, kubeBrokerResolver, type Transports } from '../../emitter/index.ts';
import { DEFAULTS, type GateConfig } from '../config.ts';
import type { Caches } from '../kube/caches.ts';
import { createTokenSource, kubeAcceptedByApiserver, kubeMintToken, refuseApiserverAudiences } from './sa-tokens.ts';

export function hookTransports(
  kc: KubeConfig,
  caches: Caches,
  config: Pick<GateConfig, 'serviceAccount' | 'broker' | 'nats' | 'serviceDns'>,
  log: Logger,
): Transports {
  // The gate's token for hooks that name an audience (direct HTTP) and for Brokers that announce
  // one (Knative Eventing's sender identity); minted only when one does.
  const gateTokens = createTokenSource(
    refuseApiserverAudiences(
      kubeMintToken(kc, { serviceAccount: config.serviceAccount ?? { namespace: DEFAULTS.namespace, name: 'knative-prestart-gate' } }),
      kubeAcceptedByApiserver(kc),
    ),
  );
  return createTransports({
    http: {
      ...(config.serviceDns === undefined ? {} : { serviceDns: config.serviceDns }),
      bearerFor: async (hook) => {
        const audience = caches.catalog.get(hook)?.spec?.identity?.audience;
        return audience === undefined ? undefined : gateTokens.token(audience);
      },
    },
    broker: {
      resolveBrokerUrl: kubeBrokerResolver(async () => kc, config.broker?.classes),
      bearerFor: (audience) => gateTokens.token(audience),
      ...(config.broker?.proxy === undefined ? {} : { proxy: config.broker.proxy }),
    },
    ...(config.nats
      ? { nats: { servers: config.nats.servers, security: config.nats.security, replicas: config.nats.replicas, logger: log } }
      : {}),
  });
}
