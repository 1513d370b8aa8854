import type { RequestHandler } from 'express';
import { prometheus, registry } from '@mail/common';

const requestDuration = new prometheus.Histogram({
  name: 'http_request_duration_seconds',
  help: 'Gateway request latency by route and status',
  labelNames: ['method', 'route', 'status'],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

/** Times every request; the route label is the OpenAPI path template, never the raw URL (bounded cardinality). */
export const httpMetrics: RequestHandler = (req, res, next) => {
  const stop = requestDuration.startTimer({ method: req.method });
  res.on('finish', () => {
    const openapi = (req as { openapi?: { openApiRoute?: string } }).openapi;
    stop({ route: openapi?.openApiRoute ?? 'unmatched', status: String(res.statusCode) });
  });
  next();
};
