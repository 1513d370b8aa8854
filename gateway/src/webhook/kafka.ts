import { Kafka, logLevel, type Admin, type ITopicConfig, type logCreator } from 'kafkajs';
import type { Logger } from '@mail/common';

const PINO_LEVEL: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/** kafkajs logs into the process's pino logger, warnings and worse only (its info level is chatty). */
export function createKafka(clientId: string, brokers: string[], logger: Logger): Kafka {
  const toPino: logCreator =
    () =>
    ({ namespace, level, log }) => {
      const { message, timestamp: _timestamp, logger: _name, ...details } = log;
      logger[PINO_LEVEL[level] ?? 'info']({ kafka: namespace, ...details }, message);
    };
  return new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.WARN,
    logCreator: toPino,
    // Reconnect quickly once a broker is back; callers bound their own waits.
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 5 },
  });
}

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
      const existing = new Set(await admin.listTopics());
      const missing = topics.filter((topic) => !existing.has(topic.topic));
      if (missing.length > 0) await admin.createTopics({ topics: missing, waitForLeaders: true });
      ready = true;
      logger.info({ topics: topics.map((t) => t.topic), created: missing.map((t) => t.topic) }, 'kafka topics ready');
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
