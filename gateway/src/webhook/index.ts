import type { Router } from 'express';
import { createKafka, topicConfig, type Logger } from '@mail/common';
import type { WebhookConfig } from '../config';
import { EventPublisher } from './publisher';
import { webhookRouter } from './router';
import { ensureTopicsInBackground } from './topics';

export interface Webhook {
  router: Router;
  /** Readiness of Kafka for the webhook: topics created and the broker answering. */
  checkKafka: () => Promise<void>;
  /** The webhook's producer, shared with the one-click unsubscribe (which publishes events too). */
  publisher: EventPublisher;
  /** After HTTP drained. */
  close: () => Promise<void>;
}

/** The provider webhooks and their Kafka side: topic set-up, the producer, the readiness check. */
export function createWebhook(config: WebhookConfig, logger: Logger): Webhook {
  const kafka = createKafka('gateway', config.kafkaBrokers, logger);
  const admin = kafka.admin();
  const topics = ensureTopicsInBackground(admin, [topicConfig(config.eventsTopic, config.topicSettings)], logger);
  const publisher = new EventPublisher(kafka, admin, config.eventsTopic, config.publishTimeoutMs, logger);
  publisher.connect().catch((error: unknown) => logger.warn({ err: error }, 'kafka producer not connected yet'));
  const providers = config.providers.map((provider) => provider.create(logger));
  for (const provider of providers.filter((candidate) => !candidate.verifies)) {
    const where = { provider: provider.name, paths: provider.paths };
    if (config.requireCredentials) logger.info(where, 'webhook provider without its credential: disabled (404)');
    else logger.warn(where, 'webhook provider without its credential: UNVERIFIED posts are accepted');
  }
  return {
    router: webhookRouter({ providers, requireCredentials: config.requireCredentials, publisher }),
    publisher,
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
