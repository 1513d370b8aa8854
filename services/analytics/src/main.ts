// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import { runService } from '@mail/common';
import { analyticsV1 } from '@mail/proto';
import { readConfig } from './config';
import { analyticsHandlers } from './grpc/handlers';
import { openEventStore } from './store/connection';

void runService({
  name: 'analytics',
  grpcAddressVariable: 'ANALYTICS_GRPC_ADDR',
  defaults: { grpcAddress: '127.0.0.1:50054', opsPort: 9104 },
  async start({ env, logger, readiness }) {
    const config = readConfig(env);
    const events = await openEventStore(config.clickhouse, config.reads);
    readiness.add('clickhouse', () => events.ping());
    return {
      grpcServices: [{ definition: analyticsV1.AnalyticsServiceService, implementation: analyticsHandlers(logger, events) }],
      close: [{ name: 'close clickhouse', run: () => events.close() }],
    };
  },
});
