import type { Knex } from 'knex';
import * as grpc from '@grpc/grpc-js';
import { Readiness, createLogger } from '@mail/common';
import { createTestPostgres, startTestGrpcService, type Rpc } from '@mail/local';
import { brandguideV1 } from '@mail/proto';
import { brandGuideHandlers } from '../src/grpc/handlers';
import { openDatabase } from '../src/store/database';

export { failure, type Failure } from '@mail/local';

export interface BrandGuideService {
  /** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
  rpc: Rpc<brandguideV1.BrandGuideServiceClient>;
  address: string;
  db: Knex;
  close(): Promise<void>;
}

/** The brand-guide handlers on 127.0.0.1:0 over a private database, with a readiness check named "postgres" as in main.ts. */
export async function startBrandGuideService(): Promise<BrandGuideService> {
  const service = await startTestGrpcService({
    database: () => createTestPostgres('brand_guide'),
    client: brandguideV1.BrandGuideServiceClient,
    open: async (postgres) => {
      const db = await openDatabase(postgres.url);
      return {
        definition: brandguideV1.BrandGuideServiceService,
        implementation: brandGuideHandlers(createLogger('brand-guide', 'silent'), db),
        readiness: new Readiness().add('postgres', () => db.raw('select 1')),
        resources: db,
        close: () => db.destroy(),
      };
    },
  });
  return { rpc: service.rpc, address: service.address, db: service.resources, close: () => service.close() };
}

export const { status } = grpc;
export const WORKSPACE_A = '0b6b5b8e-8a55-4c0e-9d3c-000000000001';
export const WORKSPACE_B = '0b6b5b8e-8a55-4c0e-9d3c-000000000002';
export const MISSING_UUID = '00000000-0000-4000-8000-000000000000';
