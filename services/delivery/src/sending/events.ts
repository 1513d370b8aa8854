import { createHash } from 'node:crypto';
import type { Admin, Kafka, Message, Producer } from 'kafkajs';
import {
  EVENT_BATCH_SCHEMA,
  RECORD_SCHEMA_HEADER,
  createIdempotentProducer,
  partitionOfKey,
  readPartitionCount,
  sendToPartitions,
  smtpBounceClass,
} from '@mail/common';
import { eventsV1 } from '@mail/proto';
import type { MailboxReport } from '../domain/reports';
import type { BouncedRecipient, MessageRecipient, SentRecipient } from '../store/sending';

/** The same key always gives the same id: ingestion drops a republished event as a duplicate. */
export function stableEventId(kind: string, key: string): string {
  return `smtp-${kind}-${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

/** The normalized `sent` event of a message our own sender handed over (provider `smtp`). */
export function sentEvent(sent: SentRecipient, receivedAt: Date): eventsV1.EngagementEvent {
  return {
    providerEventId: stableEventId('sent', `${sent.runId}:${sent.email}`),
    providerMessageId: sent.messageId,
    provider: 'smtp',
    eventType: eventsV1.EventType.EVENT_TYPE_SENT,
    bounceType: eventsV1.BounceType.BOUNCE_TYPE_UNSPECIFIED,
    bounceClass: eventsV1.BounceClass.BOUNCE_CLASS_UNSPECIFIED,
    email: sent.email,
    occurredAt: sent.sentAt,
    receivedAt,
    categories: sent.providerCategoryId === null ? [] : [sent.providerCategoryId],
    rawJson: JSON.stringify({ run_id: sent.runId, message_id: sent.messageId }),
    machineOpen: false,
    machineClick: false,
    variantId: sent.variantId ?? undefined,
    runId: sent.runId,
    workspaceId: sent.workspaceId,
    campaignId: sent.campaignId,
  };
}

/**
 * The `bounce` event of a recipient its server refused at hand-over: hard for a 5xx answer, soft for a 4xx one that
 * outlasted its attempts (docs/api.md, "Bounces without a provider"); classed by the answer's enhanced status code.
 */
export function smtpBounceEvent(bounced: BouncedRecipient, receivedAt: Date): eventsV1.EngagementEvent {
  return {
    providerEventId: stableEventId('bounce', `${bounced.runId}:${bounced.email}`),
    providerMessageId: bounced.messageId,
    provider: 'smtp',
    eventType: eventsV1.EventType.EVENT_TYPE_BOUNCE,
    bounceType: bounced.code >= 500 ? eventsV1.BounceType.BOUNCE_TYPE_HARD : eventsV1.BounceType.BOUNCE_TYPE_SOFT,
    bounceClass: smtpBounceClass(bounced.code, bounced.reason),
    email: bounced.email,
    occurredAt: bounced.bouncedAt,
    receivedAt,
    categories: bounced.providerCategoryId === null ? [] : [bounced.providerCategoryId],
    reason: bounced.reason,
    rawJson: JSON.stringify({ run_id: bounced.runId, message_id: bounced.messageId, smtp_code: bounced.code, response: bounced.reason }),
    machineOpen: false,
    machineClick: false,
    variantId: bounced.variantId ?? undefined,
    runId: bounced.runId,
    workspaceId: bounced.workspaceId,
    campaignId: bounced.campaignId,
  };
}

/**
 * The event of a report in the bounce mailbox about one of our messages: a `bounce` (classed by its status code
 * and diagnostic) or a `spamreport`. `reportKey` names the mailbox message: read again (its deletion did not take),
 * it gives the same event id, which ingestion drops as a duplicate.
 */
export function mailboxReportEvent(
  report: MailboxReport,
  recipient: MessageRecipient,
  reportKey: string,
  occurredAt: Date,
  receivedAt: Date,
): eventsV1.EngagementEvent {
  const bounce = report.kind === 'bounce';
  return {
    providerEventId: stableEventId(bounce ? 'dsn' : 'arf', reportKey),
    providerMessageId: recipient.messageId,
    provider: 'smtp',
    eventType: bounce ? eventsV1.EventType.EVENT_TYPE_BOUNCE : eventsV1.EventType.EVENT_TYPE_SPAM_REPORT,
    bounceType: !bounce
      ? eventsV1.BounceType.BOUNCE_TYPE_UNSPECIFIED
      : report.bounceType === 'hard'
        ? eventsV1.BounceType.BOUNCE_TYPE_HARD
        : eventsV1.BounceType.BOUNCE_TYPE_SOFT,
    bounceClass: bounce ? smtpBounceClass(undefined, report.reason, report.status) : eventsV1.BounceClass.BOUNCE_CLASS_UNSPECIFIED,
    email: recipient.email,
    occurredAt,
    receivedAt,
    categories: recipient.providerCategoryId === null ? [] : [recipient.providerCategoryId],
    reason: bounce ? report.reason : undefined,
    rawJson: JSON.stringify({
      run_id: recipient.runId,
      message_id: recipient.messageId,
      report: bounce ? { status: report.status, diagnostic: report.reason } : { feedback_type: 'abuse' },
    }),
    machineOpen: false,
    machineClick: false,
    variantId: recipient.variantId ?? undefined,
    runId: recipient.runId,
    workspaceId: recipient.workspaceId,
    campaignId: recipient.campaignId,
  };
}

/**
 * Publishes delivery's own events to the events topic as the webhook does: one
 * EngagementEventBatch record per partition, each event in the partition its
 * address keys, acknowledged by all in-sync replicas.
 */
export class EventPublisher {
  private producer?: Producer;
  private partitions?: number;

  constructor(
    private readonly kafka: Kafka,
    private readonly admin: Admin,
    private readonly topic: string,
  ) {}

  async publish(events: eventsV1.EngagementEvent[]): Promise<void> {
    const producer = await this.connected();
    const partitions = this.partitions ?? (this.partitions = await readPartitionCount(this.admin, this.topic));
    const byPartition = new Map<number, Buffer[]>();
    for (const item of events) {
      const partition = partitionOfKey(item.email, partitions);
      const event = Buffer.from(eventsV1.EngagementEvent.encode(item).finish());
      const bytes = Buffer.from(eventsV1.EngagementEventBatch.encode({ events: [event] }).finish());
      const values = byPartition.get(partition);
      if (values) values.push(bytes);
      else byPartition.set(partition, [bytes]);
    }
    const records: Message[] = [...byPartition].map(([partition, values]) => ({
      partition,
      headers: { [RECORD_SCHEMA_HEADER]: EVENT_BATCH_SCHEMA },
      value: Buffer.concat(values),
    }));
    try {
      await sendToPartitions(producer, this.topic, records);
    } catch (error) {
      // A failed send may have left part of it with the broker: the next one starts a new producer session.
      this.producer = undefined;
      this.partitions = undefined;
      await producer.disconnect().catch(() => undefined);
      throw error;
    }
  }

  async close(): Promise<void> {
    await this.producer?.disconnect().catch(() => undefined);
    this.producer = undefined;
  }

  private async connected(): Promise<Producer> {
    if (!this.producer) {
      await this.admin.connect();
      const producer = createIdempotentProducer(this.kafka);
      await producer.connect();
      this.producer = producer;
    }
    return this.producer;
  }
}
