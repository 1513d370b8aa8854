import type { Knex } from 'knex';
import * as grpc from '@grpc/grpc-js';
import { ChangeFeed, Readiness, createLogger } from '@mail/common';
import { createTestPostgres, startTestGrpcService, type Rpc, type TestPostgres } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import { campaignHandlers } from '../src/grpc/handlers';
import { CATEGORY_CHANNEL } from '../src/store/campaigns';
import { openDatabase } from '../src/store/database';

export { failure, type Failure } from '@mail/local';

type Client = campaignV1.CampaignServiceClient;

export interface CampaignService {
  /** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
  rpc: Rpc<Client>;
  client: Client;
  address: string;
  db: Knex;
  postgres: TestPostgres;
  close(): Promise<void>;
}

/** The campaign handlers on 127.0.0.1:0 over a private database, with a readiness check named "postgres" as in main.ts. */
export async function startCampaignService(): Promise<CampaignService> {
  const service = await startTestGrpcService({
    database: () => createTestPostgres('campaign'),
    client: campaignV1.CampaignServiceClient,
    open: async (postgres) => {
      const db = await openDatabase(postgres.url);
      const logger = createLogger('campaign', 'silent');
      const feed = new ChangeFeed(postgres.url, CATEGORY_CHANNEL, logger, { initialMs: 50, maxMs: 200 });
      await feed.start();
      return {
        definition: campaignV1.CampaignServiceService,
        implementation: campaignHandlers(logger, db, feed),
        readiness: new Readiness().add('postgres', () => db.raw('select 1')),
        resources: db,
        close: async () => {
          await feed.close();
          await db.destroy();
        },
      };
    },
  });
  const { rpc, client, address, database: postgres, resources: db } = service;
  return { rpc, client, address, db, postgres, close: () => service.close() };
}

export const { RecipientSource, DeliveryMode } = campaignV1;
export const { status } = grpc;
export const WORKSPACE_A = '0b6b5b8e-8a55-4c0e-9d3c-000000000001';
export const WORKSPACE_B = '0b6b5b8e-8a55-4c0e-9d3c-000000000002';
export const MISSING_UUID = '00000000-0000-4000-8000-000000000000';
