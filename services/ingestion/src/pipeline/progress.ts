import type { Admin } from 'kafkajs';
import type { Logger } from '@mail/common';
import { ingestionMetrics as metrics } from '../metrics';

export interface ProgressOptions {
  admin: Admin;
  topic: string;
  groupId: string;
  /** The partitions of the topic this member holds now. */
  assigned: () => number[];
  /** A partition with records waiting and its committed offset unchanged this long is stalled. */
  stallMs: number;
  logger: Logger;
}

/** A partition with records waiting: its committed offset, and when it was first seen there. */
interface Waiting {
  committed: string;
  since: number;
}

/**
 * Whether the consumer makes progress, read from the broker rather than from
 * the pipeline (which may be the thing stuck): every sampling, the group's
 * committed offsets and the ends of the partitions this member holds. A
 * partition stalls while records wait on it (lag > 0) and its committed
 * offset stays where it was; ingestion_partition_stalled_seconds says for how
 * long, and readiness fails once that reaches `stallMs`.
 */
export class ProgressWatch {
  private readonly waiting = new Map<number, Waiting>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> | undefined;

  constructor(private readonly options: ProgressOptions) {}

  /** Samples every quarter of `stallMs` (at most every 15 s), so that a stall shows within a quarter of its time. */
  start(): void {
    const intervalMs = Math.min(Math.max(Math.floor(this.options.stallMs / 4), 100), 15_000);
    const run = (): void => {
      this.sampling = this.sample().catch((error: unknown) =>
        // Kafka itself down: readiness reports it; the stall clocks keep running from what was last read.
        this.options.logger.warn({ err: error }, 'could not read the consumer group offsets'),
      );
      void this.sampling.finally(() => {
        if (this.timer) this.timer = setTimeout(run, intervalMs);
      });
    };
    this.timer = setTimeout(run, 0);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.sampling;
  }

  /** Reads the offsets once; `now` is when. */
  async sample(now = Date.now()): Promise<void> {
    const { admin, topic, groupId } = this.options;
    const [ends, [group]] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId, topics: [topic] })]);
    const committed = new Map(group.partitions.map(({ partition, offset }) => [partition, offset]));
    const held = new Set(this.options.assigned());
    for (const { partition, low, high } of ends) {
      // -1: nothing committed yet, so the consumer starts at the partition's first record.
      const at = committed.get(partition) ?? '-1';
      const lag = BigInt(high) - (at === '-1' ? BigInt(low) : BigInt(at));
      const previous = this.waiting.get(partition);
      if (!held.has(partition) || lag <= 0n) {
        this.waiting.delete(partition);
        if (held.has(partition)) metrics.stalledSeconds.set({ partition: String(partition) }, 0);
        else metrics.stalledSeconds.remove({ partition: String(partition) });
        continue;
      }
      const since = previous?.committed === at ? previous.since : now;
      this.waiting.set(partition, { committed: at, since });
      metrics.stalledSeconds.set({ partition: String(partition) }, (now - since) / 1000);
    }
  }

  /** The readiness check: throws while a partition held is stalled for `stallMs` or longer. */
  check(now = Date.now()): void {
    const held = new Set(this.options.assigned());
    const stalled = [...this.waiting].filter(([partition, { since }]) => held.has(partition) && now - since >= this.options.stallMs);
    if (stalled.length > 0) {
      throw new Error(`no progress on partitions ${stalled.map(([partition]) => partition).join(', ')} with records waiting`);
    }
  }
}
