// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import { ChangeFeed, runService } from '@mail/common';
import { identityV1 } from '@mail/proto';
import { readConfig } from './config';
import { identityHandlers } from './grpc/handlers';
import { ACCESS_CHANNEL, openDatabase } from './store/database';

void runService({
  name: 'identity',
  grpcAddressVariable: 'IDENTITY_GRPC_ADDR',
  defaults: { grpcAddress: '127.0.0.1:50051', opsPort: 9101 },
  async start({ env, logger, readiness }) {
    const config = readConfig(env);
    const db = await openDatabase(config.databaseUrl);
    const feed = new ChangeFeed(config.databaseUrl, ACCESS_CHANNEL, logger);
    await feed.start();
    readiness.add('postgres', () => db.raw('select 1'));
    return {
      grpcServices: [{ definition: identityV1.IdentityServiceService, implementation: identityHandlers(logger, db, feed, config) }],
      close: [
        { name: 'close access change feed', run: () => feed.close() },
        { name: 'close postgres', run: () => db.destroy() },
      ],
    };
  },
});
