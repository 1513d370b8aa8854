// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import { runService } from '@mail/common';
import { brandguideV1 } from '@mail/proto';
import { readConfig } from './config';
import { brandGuideHandlers } from './grpc/handlers';
import { openDatabase } from './store/database';

void runService({
  name: 'brand-guide',
  grpcAddressVariable: 'BRAND_GUIDE_GRPC_ADDR',
  defaults: { grpcAddress: '127.0.0.1:50053', opsPort: 9103 },
  async start({ env, logger, readiness }) {
    const config = readConfig(env);
    const db = await openDatabase(config.databaseUrl);
    readiness.add('postgres', () => db.raw('select 1'));
    return {
      grpcServices: [{ definition: brandguideV1.BrandGuideServiceService, implementation: brandGuideHandlers(logger, db) }],
      close: [{ name: 'close postgres', run: () => db.destroy() }],
    };
  },
});
