import pino from 'pino';
import { activeSpanIds } from './trace-context';

export type Logger = pino.Logger;

/** Structured JSON logs on stdout, one logger per process; a line written inside a traced span carries its trace_id and span_id. */
export function createLogger(service: string, level = 'info'): Logger {
  return pino({
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: activeSpanIds,
    redact: {
      paths: ['req.headers.authorization', 'authorization', 'password', '*.password'],
      censor: '[redacted]',
    },
  });
}
