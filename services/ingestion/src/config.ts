import { checkTopicSettings, type EnvReader, type TopicSettings } from '@mail/common';
import { readEventStoreConfig, type EventStoreConfig } from '@mail/event-store';

export interface IngestionConfig {
  kafkaBrokers: string[];
  eventsTopic: string;
  deadLetterTopic: string;
  consumerGroup: string;
  /** Used when ingestion creates its topics. */
  topicSettings: TopicSettings;
  /**
   * One fetch is one batch: the broker answers once this many bytes are
   * waiting (at most maxBatchBytes) or after maxBatchWaitMs, whichever first.
   * A batch is an insert into ClickHouse, which spends about as much on an
   * insert as on its rows at a sending run's rate of events: a second's wait
   * keeps to its advice of an insert a second (bench/README.md, "the
   * fourteenth session").
   */
  minBatchBytes: number;
  maxBatchBytes: number;
  maxBatchWaitMs: number;
  clickhouse: EventStoreConfig;
  campaignAddress: string;
  /** Backstop for the category cache, which the campaign service's change stream keeps current. */
  categoryCacheTtlMs: number;
  /** How often the event store is tended (closed months merged, agreeing unsettled days cleared); the first pass runs a minute after start. */
  maintenanceIntervalMs: number;
  /** Unmatched events naming a category a campaign took are republished this long after the change, and again after rematchFollowUpMs. */
  rematchDelayMs: number;
  rematchFollowUpMs: number;
  /** Not ready once a partition held has had records waiting this long with its committed offset unchanged. */
  stallReadyMs: number;
}

export function readConfig(env: EnvReader): IngestionConfig {
  return {
    kafkaBrokers: env.list('KAFKA_BROKERS', ['127.0.0.1:29092']),
    eventsTopic: env.string('KAFKA_EVENTS_TOPIC', 'engagement-events'),
    deadLetterTopic: env.string('KAFKA_DLQ_TOPIC', 'engagement-events-dlq'),
    consumerGroup: env.string('KAFKA_CONSUMER_GROUP', 'ingestion'),
    topicSettings: checkTopicSettings({
      partitions: env.int('KAFKA_TOPIC_PARTITIONS', 6),
      replicationFactor: env.int('KAFKA_TOPIC_REPLICATION_FACTOR', 1),
      minInsyncReplicas: env.optionalInt('KAFKA_TOPIC_MIN_INSYNC_REPLICAS'),
    }),
    minBatchBytes: env.int('INGESTION_MIN_BATCH_BYTES', 1_000_000),
    maxBatchBytes: env.int('INGESTION_MAX_BATCH_BYTES', 8_000_000),
    maxBatchWaitMs: env.int('INGESTION_MAX_BATCH_WAIT_MS', 1_000),
    clickhouse: readEventStoreConfig(env),
    campaignAddress: env.string('CAMPAIGN_GRPC_ADDR', '127.0.0.1:50052'),
    categoryCacheTtlMs: env.int('CATEGORY_CACHE_TTL_MS', 300_000),
    maintenanceIntervalMs: env.int('INGESTION_MAINTENANCE_INTERVAL_MS', 3_600_000),
    rematchDelayMs: env.int('INGESTION_REMATCH_DELAY_MS', 1_000),
    rematchFollowUpMs: env.int('INGESTION_REMATCH_FOLLOW_UP_MS', 60_000),
    stallReadyMs: env.int('INGESTION_STALL_READY_MS', 300_000),
  };
}
