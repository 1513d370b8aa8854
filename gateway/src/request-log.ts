import type { RequestHandler } from 'express';
import type { Logger } from '@mail/common';

/**
 * One debug line per answered request. It is written inside the request's
 * span (the HTTP instrumentation binds the response's listeners to it), so
 * when tracing is on it carries the request's trace_id and span_id.
 */
export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      if (!logger.isLevelEnabled('debug')) return;
      const openapi = (req as { openapi?: { openApiRoute?: string } }).openapi;
      logger.debug(
        {
          method: req.method,
          route: openapi?.openApiRoute ?? req.path,
          status: res.statusCode,
          durationMs: Number(process.hrtime.bigint() - started) / 1e6,
        },
        'request answered',
      );
    });
    next();
  };
}
