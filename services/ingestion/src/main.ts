// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import {
  createClient,
  createIdempotentProducer,
  createKafka,
  ensureTopics,
  partitionOfKey,
  readPartitionCount,
  runService,
  sendToPartitions,
  topicConfig,
} from '@mail/common';
import { StoreLayout, createClickHouse, ensureEventSchema } from '@mail/event-store';
import { campaignV1 } from '@mail/proto';
import { CategoryResolver } from './grpc/categories';
import { readConfig } from './config';
import { startMaintenance } from './background/maintenance';
import { startConsumer } from './pipeline/consumer';
import { ProgressWatch } from './pipeline/progress';
import { encodeRecord } from './domain/events';
import { UnmatchedRematcher } from './background/rematch';
import { EventWriter } from './store/events';
import { SuppressionStateStore } from './store/suppressions';
import { UnmatchedEvents } from './store/unmatched';
import { UnsettledDays } from './store/unsettled';

void runService({
  name: 'ingestion',
  grpcAddressVariable: 'INGESTION_GRPC_ADDR',
  defaults: { grpcAddress: '127.0.0.1:50055', opsPort: 9105 },
  // Only the ClickHouse tables: start() would join the consumer group.
  async migrate({ env }) {
    const config = readConfig(env);
    await ensureEventSchema(config.clickhouse.urls, config.clickhouse.database, config.clickhouse.cluster);
  },
  async start({ env, logger, readiness }) {
    const config = readConfig(env);
    const { urls, database, cluster } = config.clickhouse;
    await ensureEventSchema(urls, database, cluster);
    const clickhouse = createClickHouse(urls, database, { cluster });
    const writer = new EventWriter(clickhouse);
    const suppressions = new SuppressionStateStore(clickhouse);

    const categories = new CategoryResolver(
      createClient(campaignV1.CampaignServiceClient, config.campaignAddress),
      config.categoryCacheTtlMs,
      logger,
    );
    categories.start();

    const kafka = createKafka('ingestion', config.kafkaBrokers, logger);
    const admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, [
      topicConfig(config.eventsTopic, config.topicSettings),
      topicConfig(config.deadLetterTopic, config.topicSettings),
    ]);
    const unsettled = new UnsettledDays(clickhouse);
    const consumer = await startConsumer({
      kafka,
      config,
      store: { resolve: (ids) => categories.resolve(ids), writer, suppressions },
      markUnsettled: (days) => unsettled.mark(days),
      logger,
      onFatalCrash: (error) => {
        // The uncommitted batch is redelivered to whoever consumes next; a supervisor restarts this process.
        logger.fatal({ err: error }, 'kafka consumer stopped for good, exiting');
        process.exit(1);
      },
    });

    // Unmatched events go back through the events topic once a campaign takes their category.
    const republisher = createIdempotentProducer(kafka);
    await republisher.connect();
    const rematcher = new UnmatchedRematcher(
      {
        unmatched: new UnmatchedEvents(clickhouse),
        resolve: (ids) => categories.resolve(ids),
        publish: async (events) => {
          if (events.length === 0) return;
          const partitions = await readPartitionCount(admin, config.eventsTopic);
          const records = events.map(encodeRecord).map((record) => ({ ...record, partition: partitionOfKey(record.key, partitions) }));
          await sendToPartitions(republisher, config.eventsTopic, records);
        },
        logger,
      },
      { mayRun: () => consumer.ownsFirstPartition(), delayMs: config.rematchDelayMs, followUpMs: config.rematchFollowUpMs },
    );
    categories.onChange((ids) => rematcher.categoriesChanged(ids));
    // Changes the stream did not report, or that reached this process while another one swept, are caught by a full sweep.
    categories.onChangesMissed(() => rematcher.sweepAllSoon());
    consumer.onFirstPartitionTaken(() => rematcher.sweepAllSoon());

    // Merges run long on big months: their own client, without the 30 s request timeout.
    const maintenanceClient = createClickHouse(urls, database, { requestTimeoutMs: 3_600_000, cluster });
    const maintenance = startMaintenance({
      clickhouse: maintenanceClient,
      database: new StoreLayout(database, cluster),
      schedule: { firstAfterMs: 60_000, intervalMs: config.maintenanceIntervalMs },
      mayRebuild: () => consumer.ownsFirstPartition(),
      rematchUnmatched: (since) => rematcher.sweepRecent(since),
      logger,
    });

    const progress = new ProgressWatch({
      admin,
      topic: config.eventsTopic,
      groupId: config.consumerGroup,
      assigned: () => consumer.assignedPartitions(),
      stallMs: config.stallReadyMs,
      logger,
    });
    progress.start();

    readiness
      .add('progress', () => Promise.resolve().then(() => progress.check()))
      .add('kafka', async () => {
        if (!consumer.consuming()) throw new Error('not consuming');
        await admin.describeCluster();
      })
      .add('clickhouse', async () => {
        const ping = await clickhouse.ping();
        if (!ping.success) throw ping.error;
      });
    return {
      // No service of its own: the gRPC server answers grpc.health.v1 only, which runService adds to every server.
      grpcServices: [],
      close: [
        { name: 'stop consuming (the batch in progress finishes and commits)', run: () => consumer.stop() },
        { name: 'stop maintenance (abandons a merge in progress)', run: () => maintenance.stop() },
        { name: 'stop re-matching (the sweep in progress finishes)', run: () => rematcher.close() },
        { name: 'stop watching progress', run: () => progress.stop() },
        { name: 'close kafka producer (re-matching)', run: () => republisher.disconnect() },
        { name: 'close kafka admin', run: () => admin.disconnect() },
        { name: 'close campaign client', run: () => Promise.resolve(categories.close()) },
        { name: 'close clickhouse', run: () => clickhouse.close() },
        { name: 'close clickhouse (maintenance)', run: () => maintenanceClient.close() },
      ],
    };
  },
});
