// A real HTTP server on 127.0.0.1 standing in as a Broker's ingress (the real Broker is
// exercised end to end in test/e2e/broker.test.ts): POST /<namespace>/<broker> answers from a
// per-path script, then 202; a Broker whose name starts with "busy" holds its answer, as the
// InMemoryChannel does until every subscriber answered.
import express from 'express';
import { type Listening, listen } from '../../support/http-server.ts';

export interface IngressHit {
  at: number;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface FakeIngress extends Listening {
  hits: IngressHit[];
  hitsFor(path: string): IngressHit[];
  /** Statuses a path answers, in order, before it answers 202. */
  scripted: Map<string, number[]>;
  /** Answers the busy ingress holds back, by CloudEvent id. */
  held: Map<string, () => void>;
}

export async function startFakeIngress(): Promise<FakeIngress> {
  const hits: IngressHit[] = [];
  const scripted = new Map<string, number[]>();
  const held = new Map<string, () => void>();
  const app = express();
  app.use(express.raw({ type: () => true }));
  app.post('/:ns/:name', (req, res) => {
    hits.push({ at: Date.now(), path: req.path, headers: req.headers, body: Buffer.isBuffer(req.body) ? req.body.toString() : '' });
    if (req.params.name.startsWith('busy')) {
      held.set(String(req.headers['ce-id']), () => res.status(202).end());
      return;
    }
    const status = scripted.get(req.path)?.shift() ?? 202;
    if (status >= 400) res.status(status).type('text/plain').send(`status ${status} from ${req.path}`);
    else res.status(status).end();
  });
  const listening = await listen(app);
  return {
    ...listening,
    hits,
    hitsFor: (path) => hits.filter((h) => h.path === path),
    scripted,
    held,
    async close() {
      for (const answer of held.values()) answer();
      await listening.close();
    },
  };
}
