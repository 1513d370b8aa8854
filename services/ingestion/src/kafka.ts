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

/** Creates the topics that are missing; existing ones are left as they are. */
export async function ensureTopics(admin: Admin, topics: ITopicConfig[]): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((topic) => !existing.has(topic.topic));
  if (missing.length > 0) await admin.createTopics({ topics: missing, waitForLeaders: true });
}
