import {
  Kafka,
  KafkaJSError,
  Partitioners,
  logLevel,
  type Admin,
  type ITopicConfig,
  type Message,
  type Producer,
  type logCreator,
} from 'kafkajs';
import { ConfigError } from './config';
import type { Logger } from './logger';

const PINO_LEVEL: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/**
 * The engagement events topic's record contract between the webhook (writer)
 * and ingestion (reader): a record whose header `schema` is EVENT_BATCH_SCHEMA
 * carries an events.v1.EngagementEventBatch; one without it (written before
 * batching) carries one events.v1.EngagementEvent.
 */
export const RECORD_SCHEMA_HEADER = 'schema';
export const EVENT_BATCH_SCHEMA = 'events.v1.EngagementEventBatch';

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
 * A producer whose acknowledged records are written exactly once per producer
 * session. Its retries are unlimited (kafkajs's default for idempotence, which
 * the client-wide retry setting would replace) so sequence numbers stay valid;
 * callers bound their own waits.
 */
export function createIdempotentProducer(kafka: Kafka): Producer {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: Number.MAX_SAFE_INTEGER },
  });
}

/** How many times sendToPartitions sends records kafkajs left out before it gives up. */
const SEND_ROUNDS = 5;

/** Each producer's last sendToPartitions call, settled either way. */
const lastSends = new WeakMap<Producer, Promise<void>>();

/**
 * Sends records with acknowledgement from all in-sync replicas, and resolves
 * once every one is acknowledged: the records that name their partition in
 * one call (one produce request per broker), then each record that names none
 * in a call of its own. A call's answer is checked: when a broker fails during
 * a call, kafkajs retries it towards the brokers that have not answered yet
 * only, so the records of a partition whose leadership moved to a broker that
 * had answered for its own partitions are never written, and the call
 * succeeds all the same, its answer lacking that partition
 * (tulios/kafkajs#1303: acknowledged events were lost when a partition leader
 * was killed). Those records are sent again.
 *
 * A producer's calls go one at a time, whoever makes them. kafkajs numbers an
 * idempotent producer's records per partition as it builds a request, and when
 * one partition of a request fails it takes back the numbers of every
 * partition, written or not, before it retries. A call that took numbers in
 * between would get numbers the broker already holds, and the broker refuses
 * it for good ("out of order sequence number").
 */
export function sendToPartitions(producer: Producer, topic: string, messages: Message[]): Promise<void> {
  const previous = lastSends.get(producer) ?? Promise.resolve();
  const send = previous.then(() => sendOneByOne(producer, topic, messages));
  lastSends.set(
    producer,
    send.catch(() => undefined),
  );
  return send;
}

async function sendOneByOne(producer: Producer, topic: string, messages: Message[]): Promise<void> {
  const placed = messages.filter((message) => message.partition !== undefined);
  const unplaced = messages.filter((message) => message.partition === undefined).map((message) => [message]);
  for (const batch of [placed, ...unplaced]) {
    if (batch.length > 0) await sendAcknowledged(producer, topic, batch);
  }
}

/** Sends the records (placed ones, or one) until an answer names the partition of each. */
async function sendAcknowledged(producer: Producer, topic: string, messages: Message[]): Promise<void> {
  let pending = messages;
  for (let round = 1; ; round += 1) {
    const answered = new Set((await producer.send({ topic, acks: -1, messages: pending })).map((record) => record.partition));
    pending = pending.filter((message) => (message.partition === undefined ? answered.size === 0 : !answered.has(message.partition)));
    if (pending.length === 0) return;
    if (round === SEND_ROUNDS) {
      const partitions = [...new Set(pending.map((message) => message.partition ?? 'chosen by the partitioner'))];
      throw new Error(`kafka left ${pending.length} records of ${topic} (partitions ${partitions.join(', ')}) out ${round} times`);
    }
  }
}

/** The partition count of a topic; fails while it has none. */
export async function readPartitionCount(admin: Admin, topic: string): Promise<number> {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
  const partitions = topics.find((candidate) => candidate.name === topic)?.partitions ?? [];
  if (partitions.length === 0) throw new Error(`topic ${topic} has no partitions yet`);
  return partitions.length;
}

/** How a process creates a topic it finds missing (KAFKA_TOPIC_PARTITIONS, _REPLICATION_FACTOR, _MIN_INSYNC_REPLICAS). */
export interface TopicSettings {
  partitions: number;
  replicationFactor: number;
  /**
   * The topic's min.insync.replicas: how many replicas hold a record before
   * the producer (acks from all in-sync replicas) has it acknowledged.
   * Undefined leaves the broker's default.
   */
  minInsyncReplicas?: number;
}

/** The settings, refused when the broker would refuse them or take no write at all. */
export function checkTopicSettings(settings: TopicSettings): TopicSettings {
  const { partitions, replicationFactor, minInsyncReplicas } = settings;
  if (partitions < 1) throw new ConfigError(`KAFKA_TOPIC_PARTITIONS must be at least 1, got ${partitions}`);
  if (replicationFactor < 1) throw new ConfigError(`KAFKA_TOPIC_REPLICATION_FACTOR must be at least 1, got ${replicationFactor}`);
  if (minInsyncReplicas !== undefined && (minInsyncReplicas < 1 || minInsyncReplicas > replicationFactor)) {
    throw new ConfigError(
      `KAFKA_TOPIC_MIN_INSYNC_REPLICAS must be between 1 and KAFKA_TOPIC_REPLICATION_FACTOR (${replicationFactor}), got ${minInsyncReplicas}`,
    );
  }
  return settings;
}

/** The creation request of a topic with these settings. */
export function topicConfig(topic: string, settings: TopicSettings): ITopicConfig {
  return {
    topic,
    numPartitions: settings.partitions,
    replicationFactor: settings.replicationFactor,
    configEntries:
      settings.minInsyncReplicas === undefined ? [] : [{ name: 'min.insync.replicas', value: String(settings.minInsyncReplicas) }],
  };
}

/** How long ensureTopics waits for every partition of its topics to have a leader. */
const TOPIC_LEADERS_WAIT_MS = 30_000;

/**
 * Creates the topics that are missing (existing ones are left as they are),
 * waits until every partition of each has a leader, and returns the names it created.
 */
export async function ensureTopics(admin: Admin, topics: ITopicConfig[], leadersWaitMs = TOPIC_LEADERS_WAIT_MS): Promise<string[]> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((topic) => !existing.has(topic.topic));
  if (missing.length > 0) await admin.createTopics({ topics: missing, waitForLeaders: false });
  await awaitLeaders(
    admin,
    topics.map((topic) => topic.topic),
    leadersWaitMs,
  );
  return missing.map((topic) => topic.topic);
}

/**
 * Waits until every partition of the topics has a leader. A broker answers
 * "unknown topic" for a topic just created until the metadata reaches it,
 * which kafkajs's own wait for leaders does not retry.
 */
async function awaitLeaders(admin: Admin, names: string[], waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    let reason: string;
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: names });
      const leaderless = names.filter((name) => {
        const partitions = topics.find((topic) => topic.name === name)?.partitions ?? [];
        return partitions.length === 0 || partitions.some((partition) => partition.leader < 0);
      });
      if (leaderless.length === 0) return;
      reason = `no leader yet for ${leaderless.join(', ')}`;
    } catch (error) {
      if (!(error instanceof KafkaJSError && error.retriable)) throw error;
      reason = error.message;
    }
    if (Date.now() >= deadline) throw new Error(`kafka topics ${names.join(', ')} not ready after ${waitMs} ms: ${reason}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Whether kafkajs gave up finding a consumer group's coordinator: a broker
 * just started or restarted answers "coordinator not available" while it
 * loads its group metadata, which can outlast kafkajs's retries on a busy
 * host. It comes back.
 */
export function isCoordinatorMissing(error: unknown): boolean {
  return error instanceof KafkaJSError && error.name === 'KafkaJSGroupCoordinatorNotFound';
}
