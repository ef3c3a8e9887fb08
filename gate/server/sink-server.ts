// The gate's plain-HTTP server: the reply sink (sinks/http.ts) and the gate's own status routes
// (health, readiness, metrics) share one port, so one Service and one probe port serve both.
import type { Server } from 'node:http';
import express from 'express';
import type { Registry } from 'prom-client';
import { type HttpSinkOptions, installSinkRoutes } from '../../sinks/http.ts';
import type { GateConfig } from '../config.ts';
import type { Caches } from '../kube/caches.ts';
import { listenHttp, port } from './listen.ts';
import { installStatusRoutes, type StatusRoutes } from './status-routes.ts';

export interface SinkServer {
  server: Server;
  /** The URL hooks POST replies to (data.replyTo). */
  url: string;
  status: StatusRoutes;
}

export async function startSinkServer(
  config: GateConfig['sink'],
  sink: Omit<HttpSinkOptions, 'health'>,
  health: { caches: Pick<Caches, 'health'>; watchFailureMs: number; registry: Registry },
): Promise<SinkServer> {
  const app = express();
  const status = installStatusRoutes(app, health.caches, health.watchFailureMs, health.registry);
  installSinkRoutes(app, { ...sink, health: status.health });
  const server = await listenHttp(app, config.host, config.port);
  const url = config.publicUrl ?? `http://${config.host}:${port(server)}/events`;
  return { server, url, status };
}
