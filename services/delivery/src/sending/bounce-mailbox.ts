import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { withConnection, type Logger } from '@mail/common';
import type { eventsV1 } from '@mail/proto';
import { parseReport } from '../domain/reports';
import { deliveryMetrics } from '../metrics';
import type { SendingStore } from '../store/sending';
import { mailboxReportEvent, type EventPublisher } from './events';
import { Pop3Client } from './pop3';

/** Every replica reads with the same key: one holds it, the others skip the interval. */
const LOCK_KEY = "hashtext('delivery.bounce-mailbox')";
/** Per POP3 reply: a server that stops answering fails the read, which the next interval repeats. */
const REPLY_TIMEOUT_MS = 60_000;
/** Messages read in one pass; the rest wait for the next (after the first ones are removed). */
const PASS_MAX_MESSAGES = 1_000;
/** Unique ids of kept messages remembered; past it they are read once more. */
const KEPT_MAX = 100_000;

export interface BounceMailboxOptions {
  url: URL;
  intervalMs: number;
}

/**
 * The bounce mailbox (docs/api.md, "Bounces without a provider"): every
 * interval, the replica that takes the advisory lock reads the POP3 mailbox,
 * turns each delivery status notification and abuse report about a message
 * of a run (its Message-ID) into a `bounce` or `spamreport` event, publishes
 * them, and only then deletes those messages (DELE, then QUIT). What matches
 * nothing stays in the mailbox.
 */
export class BounceMailbox {
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly stopped = new AbortController();
  /** Messages this process found to match nothing: they stay in the mailbox, and are not read again by it. */
  private readonly kept = new Set<string>();

  constructor(
    private readonly db: Knex,
    private readonly store: SendingStore,
    private readonly events: EventPublisher,
    private readonly options: BounceMailboxOptions,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stopped.abort();
    await this.loop;
  }

  /** One pass, if no other replica is reading; resolves to whether this one read. */
  async readOnce(): Promise<boolean> {
    return withConnection(this.db, async (connection) => {
      const { rows } = await connection.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${LOCK_KEY}) AS locked`);
      if (!rows[0].locked) return false;
      try {
        await this.read();
      } finally {
        await connection.query(`SELECT pg_advisory_unlock(${LOCK_KEY})`);
      }
      return true;
    });
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        await this.readOnce();
      } catch (error) {
        deliveryMetrics.bounceMailboxReadFailures.inc();
        this.logger.warn({ err: error }, 'reading the bounce mailbox failed; the next interval tries again');
      }
      await sleep(this.options.intervalMs, undefined, { signal: this.stopped.signal }).catch(() => undefined);
    }
  }

  private async read(): Promise<void> {
    const mailbox = await Pop3Client.open(this.options.url, REPLY_TIMEOUT_MS);
    try {
      const found: { number: number; event: eventsV1.EngagementEvent }[] = [];
      let unmatched = 0;
      const receivedAt = new Date();
      const unread = (await mailbox.list()).filter((message) => !this.kept.has(message.uid));
      for (const { number, uid } of unread.slice(0, PASS_MAX_MESSAGES)) {
        const raw = await mailbox.retrieve(number);
        const report = await parseReport(raw).catch(() => undefined);
        const recipient = report && (await this.store.recipientOfMessage(report.originalMessageId));
        if (!report || !recipient) {
          if (this.kept.size >= KEPT_MAX) this.kept.clear();
          this.kept.add(uid);
          unmatched += 1;
          continue;
        }
        const key = createHash('sha256').update(raw).digest('hex');
        found.push({ number, event: mailboxReportEvent(report, recipient, key, report.date ?? receivedAt, receivedAt) });
      }
      // In Kafka first: a deletion that does not take only brings the same events again, which ingestion drops.
      if (found.length > 0) await this.events.publish(found.map((item) => item.event));
      for (const { number } of found) await mailbox.delete(number);
      await mailbox.quit();
      deliveryMetrics.bounceMailboxMessages.inc({ outcome: 'matched' }, found.length);
      deliveryMetrics.bounceMailboxMessages.inc({ outcome: 'unmatched' }, unmatched);
      deliveryMetrics.bounceEventsPublished.inc({ source: 'mailbox' }, found.length);
      if (found.length > 0 || unmatched > 0) this.logger.info({ matched: found.length, unmatched }, 'bounce mailbox read');
    } finally {
      mailbox.close();
    }
  }
}
