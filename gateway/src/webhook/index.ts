import type { Router } from 'express';
import { createKafka, type Logger } from '@mail/common';
import type { WebhookConfig } from '../config';
import { EventPublisher } from './publisher';
import { webhookRouter } from './router';
import { ensureTopicsInBackground } from './topics';

export interface Webhook {
  router: Router;
  /** Readiness of Kafka for the webhook: topics created and the broker answering. */
  checkKafka: () => Promise<void>;
  /** After HTTP drained. */
  close: () => Promise<void>;
}

/** The provider webhook and its Kafka side: topic set-up, the producer, the readiness check. */
export function createWebhook(config: WebhookConfig, logger: Logger): Webhook {
  const kafka = createKafka('gateway', config.kafkaBrokers, logger);
  const admin = kafka.admin();
  const topics = ensureTopicsInBackground(
    admin,
    [{ topic: config.eventsTopic, numPartitions: config.topicPartitions, replicationFactor: config.topicReplicationFactor }],
    logger,
  );
  const publisher = new EventPublisher(kafka, admin, config.eventsTopic, config.publishTimeoutMs, logger);
  publisher.connect().catch((error: unknown) => logger.warn({ err: error }, 'kafka producer not connected yet'));
  return {
    router: webhookRouter({ sendgridPublicKey: config.sendgridPublicKey, basicAuth: config.basicAuth, publisher }),
    checkKafka: async () => {
      if (!topics.ready()) throw new Error('kafka topics not created yet');
      await admin.describeCluster();
    },
    close: async () => {
      topics.stop();
      await publisher.close();
      await admin.disconnect();
    },
  };
}
