import { Kafka, logLevel } from 'kafkajs';
import { infraEnv } from './testing/infra';

/**
 * Run by `npm test` and `npm run bench` before they start: deletes the Kafka
 * topics earlier runs left behind. Every test and benchmark works on topics
 * of its own, and a broker holding thousands of their partitions is slow to
 * start (bench/README.md, "Local servers"). Kept: the broker's own topics
 * and those `npm run up` uses (KAFKA_EVENTS_TOPIC and KAFKA_DLQ_TOPIC, or
 * their defaults).
 */
const KEPT = new Set([process.env.KAFKA_EVENTS_TOPIC || 'engagement-events', process.env.KAFKA_DLQ_TOPIC || 'engagement-events-dlq']);

async function main(): Promise<void> {
  const admin = new Kafka({ clientId: 'prune-topics', brokers: infraEnv().kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const leftovers = (await admin.listTopics()).filter((topic) => !topic.startsWith('__') && !KEPT.has(topic));
    if (leftovers.length > 0) await admin.deleteTopics({ topics: leftovers, timeout: 60_000 });
    process.stderr.write(`[infra] kafka: deleted ${leftovers.length} topics left by earlier test and benchmark runs\n`);
  } finally {
    await admin.disconnect();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`[infra] kafka: could not delete old topics: ${String(error)}\n`);
  process.exitCode = 1;
});
