import type { Admin, ITopicConfig } from 'kafkajs';
import { ensureTopics, type Logger } from '@mail/common';

/**
 * Creates the topics that are missing (existing ones are left alone), and
 * keeps trying in the background until that worked, so the process can start
 * while the broker is still down; `ready()` feeds the readiness check.
 */
export function ensureTopicsInBackground(admin: Admin, topics: ITopicConfig[], logger: Logger): { ready(): boolean; stop(): void } {
  let ready = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const attempt = async (delayMs: number): Promise<void> => {
    try {
      await admin.connect();
      const created = await ensureTopics(admin, topics);
      ready = true;
      logger.info({ topics: topics.map((t) => t.topic), created }, 'kafka topics ready');
    } catch (error) {
      if (stopped) return;
      logger.warn({ err: error, retryInMs: delayMs }, 'cannot create the kafka topics yet');
      timer = setTimeout(() => void attempt(Math.min(delayMs * 2, 10_000)), delayMs);
    }
  };
  void attempt(500);
  return {
    ready: () => ready,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
