// The set of transports one gate runs with, and the choice among them per PrestartHook. The NATS
// transport's module (and with it the nats client) is loaded only when a gate is given NATS.
import type { HookDelivery, TransportKind } from '../api/types.ts';
import type { CloudEventRecord } from '../schemas/event.ts';
import { checkNatsTarget } from '../schemas/nats-names.ts';
import { type BrokerTransportOptions, createBrokerTransport } from './broker.ts';
import { createHttpTransport, type HttpTransportOptions } from './http.ts';
import type { NatsTransport, NatsTransportOptions } from './nats.ts';
import { type SendOutcome, type Transport, TransportError } from './transport.ts';

export type { BackgroundResult, BrokerTransportOptions } from './broker.ts';
export { createBrokerTransport } from './broker.ts';
export { type BrokerAddress, kubeBrokerResolver, type ResolveBrokerUrl } from './broker-address.ts';
export type { HttpTransportOptions } from './http.ts';
export { createHttpTransport } from './http.ts';
export type { NatsTransport, NatsTransportOptions } from './nats.ts';
export type { ProxyOption } from './proxy.ts';
export * from './transport.ts';

export interface TransportsOptions {
  /** Direct HTTP is the embedded default and always on unless set to `false`. */
  http?: HttpTransportOptions | false;
  /** Knative Broker delivery; off unless given. */
  broker?: BrokerTransportOptions;
  /** NATS JetStream delivery; off unless given. */
  nats?: NatsTransportOptions;
}

export interface Transports {
  /**
   * The transport for a hook's delivery. A kind the gate was not started with yields a transport
   * whose sends fail permanently with a message saying so: the hook then fails visibly in its
   * PrestartRun instead of the request silently going nowhere.
   */
  forDelivery(delivery: HookDelivery): Transport;
  /** Which kinds are configured. */
  readonly kinds: ReadonlySet<TransportKind>;
  /** Connects what needs a connection (NATS) and creates its stream; optional, sends do it lazily. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export function createTransports(opts: TransportsOptions = {}): Transports {
  const byKind = new Map<TransportKind, Transport>();
  let nats: NatsTransport | undefined;
  if (opts.http !== false) byKind.set('http', createHttpTransport(opts.http ?? {}));
  if (opts.broker) byKind.set('broker', createBrokerTransport(opts.broker));
  if (opts.nats) {
    nats = lazyNatsTransport(opts.nats);
    byKind.set('nats', nats);
  }
  const kinds = new Set(byKind.keys());
  return {
    kinds,
    forDelivery(delivery) {
      return byKind.get(delivery.transport) ?? unavailable(delivery.transport, kinds);
    },
    async ready() {
      await nats?.ready();
    },
    async close() {
      await Promise.allSettled([...byKind.values()].map((t) => t.close()));
    },
  };
}

/** The NATS transport, its module imported at the first use (emitter/nats.ts; `ready()` at start). */
function lazyNatsTransport(opts: NatsTransportOptions): NatsTransport {
  checkNatsTarget(opts, 'nats transport');
  let made: Promise<NatsTransport> | undefined;
  const transport = () => {
    made ??= import('./nats.ts').then((m) => m.createNatsTransport(opts));
    return made;
  };
  return {
    kind: 'nats',
    send: async (event, delivery, hook) => (await transport()).send(event, delivery, hook),
    ready: async () => (await transport()).ready(),
    close: async () => {
      if (made) await (await made).close();
    },
  };
}

const HOW_TO_ENABLE: Record<TransportKind, string> = {
  http: 'enable the http transport',
  broker: 'give the gate broker options',
  nats: 'give the gate NATS servers',
};

function unavailable(kind: TransportKind, configured: ReadonlySet<TransportKind>): Transport {
  const have = [...configured].join(', ') || 'none';
  return {
    kind,
    async send(_event: CloudEventRecord, _delivery: HookDelivery, hook: string): Promise<SendOutcome> {
      throw new TransportError(
        `hook ${hook} asks for transport "${kind}", which this gate was not configured with (configured: ${have}; ${HOW_TO_ENABLE[kind]})`,
        false,
      );
    },
    async close() {},
  };
}
