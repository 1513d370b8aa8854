import type { Logger } from './logger';
import { flushSpans } from './trace-context';

export type ShutdownStep = { name: string; run: () => Promise<unknown> };

/**
 * Runs the steps in order on SIGTERM or SIGINT (drain, then close pools), then
 * exports the spans still buffered and exits. A second signal, or the timeout, exits at once.
 */
export function onShutdown(logger: Logger, timeoutMs: number, steps: ShutdownStep[]): void {
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) {
      logger.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error('shutdown timed out');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    let failed = false;
    for (const step of steps) {
      try {
        await step.run();
      } catch (error) {
        failed = true;
        logger.error({ err: error, step: step.name }, 'shutdown step failed');
      }
    }
    logger.info('stopped');
    await flushSpans().catch((error: unknown) => logger.warn({ err: error }, 'exporting the last spans failed'));
    process.exit(failed ? 1 : 0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
