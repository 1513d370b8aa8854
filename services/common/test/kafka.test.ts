import { Writable } from 'node:stream';
import pino from 'pino';
import { infraEnv, uniqueSuffix } from '@mail/local';
import { createIdempotentProducer, createKafka, ensureTopics } from '../src/kafka';
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

  beforeAll(() => admin.connect());

  afterAll(async () => {
    await admin.deleteTopics({ topics }).catch(() => undefined);
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
