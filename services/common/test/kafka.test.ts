import { Writable } from 'node:stream';
import pino from 'pino';
import { infraEnv, uniqueSuffix } from '@mail/local';
import { ConfigResourceTypes, ConfigSource } from 'kafkajs';
import { ConfigError } from '../src/config';
import { checkTopicSettings, createIdempotentProducer, createKafka, ensureTopics, sendToPartitions, topicConfig } from '../src/kafka';
import type { Logger } from '../src/logger';

/** A pino logger whose JSON lines are kept for the test to read. */
function capturingLogger(): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return {
    logger: pino({ level: 'debug' }, sink),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe('createKafka', () => {
  it("logs kafkajs's warnings and errors through the process's pino logger, with the kafkajs namespace", async () => {
    const { logger, lines } = capturingLogger();
    const admin = createKafka('common-test', ['127.0.0.1:1'], logger).admin();
    await expect(admin.connect()).rejects.toThrow();
    const errors = lines().filter((line) => line.level === 50);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]).toMatchObject({ kafka: expect.any(String), msg: expect.any(String), broker: '127.0.0.1:1' });
    // kafkajs's own timestamp and logger name are not repeated in the pino line.
    expect(errors[0]).not.toHaveProperty('timestamp');
    expect(lines().some((line) => line.level === 30)).toBe(false);
  });
});

describe('ensureTopics and createIdempotentProducer', () => {
  const { logger } = capturingLogger();
  const kafka = createKafka('common-test', infraEnv().kafkaBrokers, logger);
  const admin = kafka.admin();
  const suffix = uniqueSuffix();
  const topics = [`common-kafka-a-${suffix}`, `common-kafka-b-${suffix}`];
  const [withSetting, withoutSetting] = [`common-kafka-isr-${suffix}`, `common-kafka-no-isr-${suffix}`];
  const together = [`common-kafka-together-a-${suffix}`, `common-kafka-together-b-${suffix}`];

  beforeAll(() => admin.connect());

  afterAll(async () => {
    await admin.deleteTopics({ topics: [...topics, withSetting, withoutSetting, ...together] }).catch(() => undefined);
    await admin.disconnect();
  });

  it('creates the missing topics only, and reports which it created', async () => {
    expect(await ensureTopics(admin, [{ topic: topics[0], numPartitions: 2 }])).toEqual([topics[0]]);
    expect(
      await ensureTopics(
        admin,
        topics.map((topic) => ({ topic, numPartitions: 3 })),
      ),
    ).toEqual([topics[1]]);
    const metadata = await admin.fetchTopicMetadata({ topics });
    // The existing topic keeps its 2 partitions.
    expect(metadata.topics.map((t) => [t.name, t.partitions.length]).sort()).toEqual([
      [topics[0], 2],
      [topics[1], 3],
    ]);
  });

  it('returns once every partition has a leader, also when several processes create the same topics at once', async () => {
    const admins = [0, 1, 2].map(() => kafka.admin());
    await Promise.all(admins.map((other) => other.connect()));
    try {
      const configs = together.map((topic) => ({ topic, numPartitions: 12 }));
      await Promise.all(admins.map((other, index) => ensureTopics(other, configs.slice(0, 1 + (index % 2)))));
      const metadata = await admin.fetchTopicMetadata({ topics: together });
      const leaders = metadata.topics.flatMap((topic) => topic.partitions.map((partition) => partition.leader));
      expect(leaders).toHaveLength(24);
      expect(leaders.every((leader) => leader >= 0)).toBe(true);
    } finally {
      await Promise.all(admins.map((other) => other.disconnect()));
    }
  });

  it('creates a topic with the min.insync.replicas of its settings, and leaves the broker default when there is none', async () => {
    await ensureTopics(admin, [
      topicConfig(withSetting, { partitions: 1, replicationFactor: 1, minInsyncReplicas: 1 }),
      topicConfig(withoutSetting, { partitions: 1, replicationFactor: 1 }),
    ]);
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [withSetting, withoutSetting].map((name) => ({
        type: ConfigResourceTypes.TOPIC,
        name,
        configNames: ['min.insync.replicas'],
      })),
    });
    // Set on the topic itself (TOPIC_CONFIG), or the broker's.
    const source = (name: string) =>
      described.resources
        .find((resource) => resource.resourceName === name)
        ?.configEntries.find((entry) => entry.configName === 'min.insync.replicas')?.configSource;
    expect(source(withSetting)).toBe(ConfigSource.TOPIC_CONFIG);
    expect(source(withoutSetting)).not.toBe(ConfigSource.TOPIC_CONFIG);
  });

  it('produces with acknowledgement from every in-sync replica', async () => {
    const producer = createIdempotentProducer(kafka);
    await producer.connect();
    try {
      const [written] = await producer.send({ topic: topics[0], acks: -1, messages: [{ key: 'k', value: 'v' }] });
      expect(written.errorCode).toBe(0);
    } finally {
      await producer.disconnect();
    }
  });
});

describe('checkTopicSettings', () => {
  it('takes a min.insync.replicas from 1 to the replication factor, or none', () => {
    expect(checkTopicSettings({ partitions: 6, replicationFactor: 3, minInsyncReplicas: 2 })).toEqual({
      partitions: 6,
      replicationFactor: 3,
      minInsyncReplicas: 2,
    });
    expect(checkTopicSettings({ partitions: 6, replicationFactor: 1 }).minInsyncReplicas).toBeUndefined();
    expect(() => checkTopicSettings({ partitions: 6, replicationFactor: 1, minInsyncReplicas: 2 })).toThrow(ConfigError);
    expect(() => checkTopicSettings({ partitions: 6, replicationFactor: 3, minInsyncReplicas: 0 })).toThrow(
      /KAFKA_TOPIC_MIN_INSYNC_REPLICAS must be between 1 and KAFKA_TOPIC_REPLICATION_FACTOR \(3\), got 0/,
    );
    expect(() => checkTopicSettings({ partitions: 0, replicationFactor: 1 })).toThrow(ConfigError);
  });
});

describe('sendToPartitions', () => {
  const { logger } = capturingLogger();
  const kafka = createKafka('common-test', infraEnv().kafkaBrokers, logger);
  const admin = kafka.admin();
  const topic = `common-kafka-send-${uniqueSuffix()}`;

  beforeAll(async () => {
    await admin.connect();
    await ensureTopics(admin, [{ topic, numPartitions: 3 }]);
  });

  afterAll(async () => {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  it('writes records placed on several partitions and records the partitioner places, each once', async () => {
    const producer = createIdempotentProducer(kafka);
    await producer.connect();
    try {
      await sendToPartitions(producer, topic, [
        { partition: 1, value: 'a' },
        { partition: 0, value: 'b' },
        { partition: 1, value: 'c' },
        { partition: 2, value: 'd' },
        { key: 'k', value: 'e' },
        { key: 'l', value: 'f' },
      ]);
    } finally {
      await producer.disconnect();
    }
    const offsets = await admin.fetchTopicOffsets(topic);
    const written = Object.fromEntries(offsets.map(({ partition, high }) => [partition, Number(high)]));
    expect(written[0] + written[1] + written[2]).toBe(6);
    expect(written[1]).toBeGreaterThanOrEqual(2);
    expect(written[0]).toBeGreaterThanOrEqual(1);
    expect(written[2]).toBeGreaterThanOrEqual(1);
  });

  it("sends one producer's calls one at a time, in the order they were made", async () => {
    // This producer waits for a missing topic rather than have the broker create it.
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    const missing = `${topic}-missing`;
    const settled: string[] = [];
    await producer.connect();
    try {
      const first = sendToPartitions(producer, missing, [{ partition: 0, value: 'a' }]).then(() => settled.push('first'));
      const second = sendToPartitions(producer, topic, [{ partition: 0, value: 'b' }]).then(() => settled.push('second'));
      // Made alone, the second call would be acknowledged meanwhile.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await ensureTopics(admin, [{ topic: missing, numPartitions: 1 }]);
      await Promise.all([first, second]);
    } finally {
      await producer.disconnect();
      await admin.deleteTopics({ topics: [missing] }).catch(() => undefined);
    }
    expect(settled).toEqual(['first', 'second']);
  });
});
