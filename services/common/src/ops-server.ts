import http from 'node:http';
import type { Readiness } from './health';
import { registry } from './metrics';

/**
 * The HTTP side door of every gRPC service: /healthz (process alive),
 * /readyz (dependencies answer) and /metrics (Prometheus).
 */
export async function startOpsServer(port: number, readiness: Readiness): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const send = (status: number, body: string, type = 'application/json'): void => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    };
    const route = async (): Promise<void> => {
      switch (req.url) {
        case '/healthz':
          return send(200, JSON.stringify({ status: 'ok' }));
        case '/readyz': {
          const report = await readiness.check();
          return send(report.ready ? 200 : 503, JSON.stringify({ status: report.ready ? 'ready' : 'not ready', ...report }));
        }
        case '/metrics':
          return send(200, await registry.metrics(), registry.contentType);
        default:
          return send(404, JSON.stringify({ detail: 'Not Found' }));
      }
    };
    route().catch(() => send(500, JSON.stringify({ detail: 'Internal Server Error' })));
  });
  await new Promise<void>((resolve) => server.listen(port, '0.0.0.0', resolve));
  return server;
}
