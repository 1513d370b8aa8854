import { createKafka, createLogger, ensureTopics } from '@mail/common';
import { infraEnv, uniqueSuffix } from '@mail/local';
import { ProgressWatch } from '../src/pipeline/progress';
import { engagementEvent, sleep, startIngestion, type Ingestion } from './harness';

// Readiness tells the truth: a consumer that makes no progress on a partition with records waiting is not ready.
jest.setTimeout(120_000);

describe('ProgressWatch (the broker offsets of a group, sampled at given times)', () => {
  const logger = createLogger('progress-test', process.env.LOG_LEVEL ?? 'silent');
  const kafka = createKafka('progress-test', infraEnv().kafkaBrokers, logger);
  const admin = kafka.admin();
  const topic = `progress-${uniqueSuffix()}`;
  const groupId = `progress-${uniqueSuffix()}`;
  const stallMs = 60_000;
  let held = [0];
  const watch = new ProgressWatch({ admin, topic, groupId, assigned: () => held, stallMs, logger });
  const commitAt = (offset: number) => admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: String(offset) }] });

  beforeAll(async () => {
    await admin.connect();
    await ensureTopics(admin, [{ topic, numPartitions: 1, replicationFactor: 1 }]);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: [{ value: 'a' }, { value: 'b' }, { value: 'c' }] });
    await producer.disconnect();
  });

  afterAll(async () => {
    await admin.deleteGroups([groupId]).catch(() => undefined);
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  it('calls a partition stalled once its records have waited stallMs with its committed offset unchanged', async () => {
    const t0 = 1_000_000;
    // Nothing committed: the three records wait.
    await watch.sample(t0);
    expect(() => watch.check(t0 + stallMs - 1)).not.toThrow();
    expect(() => watch.check(t0 + stallMs)).toThrow('no progress on partitions 0 with records waiting');

    // Progress restarts the clock.
    await commitAt(1);
    await watch.sample(t0 + stallMs);
    expect(() => watch.check(t0 + stallMs)).not.toThrow();
    await watch.sample(t0 + 2 * stallMs - 1);
    expect(() => watch.check(t0 + 2 * stallMs - 1)).not.toThrow();
    await watch.sample(t0 + 2 * stallMs);
    expect(() => watch.check(t0 + 2 * stallMs)).toThrow('no progress on partitions 0');

    // A partition this member does not hold is another member's to report.
    held = [];
    expect(() => watch.check(t0 + 3 * stallMs)).not.toThrow();
    held = [0];

    // Caught up: nothing waits, however long the offset stays.
    await commitAt(3);
    await watch.sample(t0 + 3 * stallMs);
    await watch.sample(t0 + 10 * stallMs);
    expect(() => watch.check(t0 + 10 * stallMs)).not.toThrow();
  });
});

describe('ingestion /readyz', () => {
  let ingestion: Ingestion;

  beforeAll(async () => {
    ingestion = await startIngestion({ label: 'progress', env: { INGESTION_STALL_READY_MS: '2000' } });
  });

  afterAll(async () => {
    await ingestion?.close();
  });

  const readiness = async (): Promise<{ status: number; body: { dependencies: Record<string, string> } }> => {
    const response = await fetch(`${ingestion.stack.urls.ops.ingestion}/readyz`);
    return { status: response.status, body: (await response.json()) as { dependencies: Record<string, string> } };
  };
  const waitForReadiness = async (status: number): Promise<{ dependencies: Record<string, string> }> => {
    for (let waited = 0; ; waited += 200) {
      const answer = await readiness();
      if (answer.status === status) return answer.body;
      if (waited > 60_000) throw new Error(`/readyz still answers ${answer.status}: ${JSON.stringify(answer.body)}`);
      await sleep(200);
    }
  };

  it('reports not ready while a batch makes no progress (the campaign service down), and ready once it does', async () => {
    const p = `stall-${uniqueSuffix()}`;
    const campaign = await ingestion.createCampaign(`cat-${p}`);
    await ingestion.produce([engagementEvent({ providerEventId: `${p}-before`, categories: [`cat-${p}`] })]);
    await ingestion.waitForCount(`SELECT count() AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`, 1);
    expect((await waitForReadiness(200)).dependencies).toMatchObject({ progress: 'up', kafka: 'up', clickhouse: 'up' });

    await ingestion.stack.stop('campaign');
    try {
      // A category not cached yet: the batch retries its lookup, and its offsets stay where they are.
      await ingestion.produce([engagementEvent({ providerEventId: `${p}-during`, categories: [`uncached-${p}`] })]);
      expect((await waitForReadiness(503)).dependencies).toEqual({ progress: 'down', kafka: 'up', clickhouse: 'up' });
      expect(await ingestion.metric('ingestion_partition_stalled_seconds')).toBeGreaterThan(0);
    } finally {
      await ingestion.stack.restart('campaign');
    }

    await ingestion.waitUntilCaughtUp(60_000);
    expect((await waitForReadiness(200)).dependencies).toMatchObject({ progress: 'up' });
    expect(await ingestion.count(`SELECT count() AS n FROM unmatched_events WHERE provider_event_id = '${p}-during'`)).toBe(1);
  });
});
