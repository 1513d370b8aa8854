// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import { ChangeFeed, runService } from '@mail/common';
import { campaignV1 } from '@mail/proto';
import { readConfig } from './config';
import { campaignHandlers } from './grpc/handlers';
import { TemplateChecker } from './domain/template-checker';
import { templateHandlers } from './grpc/template-handlers';
import { CATEGORY_CHANNEL } from './store/campaigns';
import { openDatabase } from './store/database';

void runService({
  name: 'campaign',
  grpcAddressVariable: 'CAMPAIGN_GRPC_ADDR',
  defaults: { grpcAddress: '127.0.0.1:50052', opsPort: 9102 },
  async start({ env, logger, readiness }) {
    const config = readConfig(env);
    const db = await openDatabase(config.databaseUrl);
    const feed = new ChangeFeed(config.databaseUrl, CATEGORY_CHANNEL, logger);
    await feed.start();
    // The gateway's /readyz asks this service for "postgres" by name.
    readiness.add('postgres', () => db.raw('select 1'));
    const checker = new TemplateChecker();
    return {
      grpcServices: [
        { definition: campaignV1.CampaignServiceService, implementation: campaignHandlers(logger, db, feed) },
        { definition: campaignV1.TemplateServiceService, implementation: templateHandlers(logger, db, checker) },
      ],
      close: [
        { name: 'close category feed', run: () => feed.close() },
        { name: 'stop template checks', run: () => checker.close() },
        { name: 'close postgres', run: () => db.destroy() },
      ],
    };
  },
});
