// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import { createKafka, runService, signUnsubscribeToken } from '@mail/common';
import { deliveryV1 } from '@mail/proto';
import { readConfig, readDatabaseUrl } from './config';
import { connectUpstream } from './grpc/clients';
import { deliveryHandlers } from './grpc/handlers';
import { BounceMailbox } from './sending/bounce-mailbox';
import { EventPublisher } from './sending/events';
import { Scheduler } from './sending/scheduler';
import { Sender, type UnsubscribeClaims } from './sending/sender';
import { SmtpTransport } from './sending/transport';
import { openDatabase } from './store/database';
import { recipientDatabaseUrl } from './store/recipient-databases';
import { stuckReads } from './store/recipient-source';
import { SendingStore } from './store/sending';

void runService({
  name: 'delivery',
  grpcAddressVariable: 'DELIVERY_GRPC_ADDR',
  defaults: { grpcAddress: '127.0.0.1:50056', opsPort: 9106 },
  async migrate({ env }) {
    await (await openDatabase(readDatabaseUrl(env))).destroy();
  },
  async start({ env, logger, readiness }) {
    const config = readConfig(env);
    const db = await openDatabase(config.databaseUrl);
    const upstream = connectUpstream(config.campaignAddress, config.analyticsAddress);
    const transport = new SmtpTransport(config.smtp);
    const kafka = createKafka('delivery', config.kafkaBrokers, logger);
    const admin = kafka.admin();
    const events = new EventPublisher(kafka, admin, config.eventsTopic);
    const signUnsubscribe = (claims: UnsubscribeClaims): string => signUnsubscribeToken(config.unsubscribeSigningKey, claims);
    const options = {
      provider: config.smtp.provider,
      batchSize: config.sendBatchSize,
      concurrency: config.sendConcurrency,
      connections: config.smtp.maxConnections,
      maxAttempts: config.sendMaxAttempts,
      retryBaseMs: config.sendRetryBaseMs,
      workerLeaseMs: config.workerLeaseMs,
      ratePerSecond: config.sendRatePerSecond,
      publicBaseUrl: config.publicBaseUrl,
      trackingSigningKey: config.trackingSigningKey,
      loads: config.recipientLoads,
      source: config.recipientSource,
      testSendPerHour: config.testSendPerHour,
    };
    const sourceUrl = async (workspaceId: string): Promise<string> =>
      (await recipientDatabaseUrl(db, config.recipientsEncryptionKey, workspaceId)) ?? config.recipientsDatabaseUrl;
    const store = new SendingStore(db);
    const sender = new Sender({ store, recipientDatabaseUrl: sourceUrl, upstream, transport, events, signUnsubscribe }, options, logger);
    const scheduler = new Scheduler(
      db,
      upstream,
      { intervalMs: config.schedulerIntervalMs, missedGraceMs: config.runMissedGraceMs },
      logger,
    );
    // A recipient database is not a readiness dependency: while one is away its runs wait, the API still answers.
    // A read that outlived its time limit and its cancel is the process's own fault: a stuck load.
    readiness.add('postgres', () => db.raw('select 1'));
    readiness.add('recipient-loads', () => (stuckReads() === 0 ? Promise.resolve() : Promise.reject(new Error('a load is stuck'))));
    const bounceMailbox = config.bounceMailbox && new BounceMailbox(db, store, events, config.bounceMailbox, logger);
    await sender.start();
    scheduler.start();
    bounceMailbox?.start();
    return {
      grpcServices: [
        {
          definition: deliveryV1.DeliveryServiceService,
          implementation: deliveryHandlers(logger, {
            db,
            upstream,
            transport,
            signUnsubscribe,
            options,
            recipientsEncryptionKey: config.recipientsEncryptionKey,
            runsChanged: () => sender.wake(),
          }),
        },
      ],
      close: [
        { name: 'stop scheduler', run: () => scheduler.stop() },
        { name: 'stop sender', run: () => sender.stop() },
        { name: 'stop bounce mailbox', run: () => bounceMailbox?.stop() ?? Promise.resolve() },
        { name: 'close smtp pool', run: () => Promise.resolve(transport.close()) },
        { name: 'close kafka', run: () => Promise.all([events.close(), admin.disconnect()]).then(() => undefined) },
        { name: 'close clients', run: () => Promise.resolve(upstream.close()) },
        { name: 'close postgres', run: () => db.destroy() },
      ],
    };
  },
});
