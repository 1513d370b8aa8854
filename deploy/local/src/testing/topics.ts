import { createKafka, createLogger } from '@mail/common';
import { eventually } from './eventually';
import { infraEnv } from './infra';

/**
 * Creates a private topic and waits until each partition has a leader. kafkajs's own `waitForLeaders` gives up
 * when a busy broker still answers UNKNOWN_TOPIC_OR_PARTITION for the new topic; this asks again, for a minute.
 */
export async function createTestTopic(topic: string, numPartitions: number): Promise<void> {
  const admin = createKafka('test-topics', infraEnv().kafkaBrokers, createLogger('test', 'silent')).admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions }] });
    await eventually(async () => {
      const [metadata] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
      const led = metadata?.partitions.filter((partition) => partition.leader >= 0).length ?? 0;
      if (led < numPartitions) throw new Error(`topic ${topic}: ${led} of ${numPartitions} partitions have a leader`);
    }, 60_000);
  } finally {
    await admin.disconnect();
  }
}
