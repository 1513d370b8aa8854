import { prometheus, registry } from '@mail/common';

/** What the senders of this process did (one series per outcome), for dashboards and alerts. */
export const deliveryMetrics = {
  messages: new prometheus.Counter({
    name: 'delivery_messages_total',
    help: 'Recipients settled by this process, by outcome (sent, failed, retried, unknown, suppressed)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  sentEventsPublished: new prometheus.Counter({
    name: 'delivery_sent_events_published_total',
    help: 'Sent events published to the events topic',
    registers: [registry],
  }),
};
