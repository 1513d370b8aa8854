import pino from 'pino';

export type Logger = pino.Logger;

/** Structured JSON logs on stdout, one logger per process. */
export function createLogger(service: string, level = 'info'): Logger {
  return pino({
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['req.headers.authorization', 'authorization', 'password', '*.password'],
      censor: '[redacted]',
    },
  });
}
