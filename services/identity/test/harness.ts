import type { Knex } from 'knex';
import * as grpc from '@grpc/grpc-js';
import { ChangeFeed, createLogger } from '@mail/common';
import { createTestPostgres, startTestGrpcService, type Rpc } from '@mail/local';
import { identityV1 } from '@mail/proto';
import { identityHandlers } from '../src/grpc/handlers';
import { ACCESS_CHANNEL, openDatabase } from '../src/store/database';

export { failure, type Failure } from '@mail/local';

export interface Identity {
  /** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
  rpc: Rpc<identityV1.IdentityServiceClient>;
  db: Knex;
  close(): Promise<void>;
}

/** The identity handlers on 127.0.0.1:0 over a private database. */
export async function startIdentity(bootstrapPlatformAdmins: string[] = []): Promise<Identity> {
  const service = await startTestGrpcService({
    database: () => createTestPostgres('identity'),
    client: identityV1.IdentityServiceClient,
    open: async (postgres) => {
      const db = await openDatabase(postgres.url);
      const logger = createLogger('identity', 'silent');
      const feed = new ChangeFeed(postgres.url, ACCESS_CHANNEL, logger, { initialMs: 50, maxMs: 200 });
      await feed.start();
      const implementation = identityHandlers(logger, db, feed, { bootstrapPlatformAdmins: new Set(bootstrapPlatformAdmins) });
      const close = async (): Promise<void> => {
        await feed.close();
        await db.destroy();
      };
      return { definition: identityV1.IdentityServiceService, implementation, resources: db, close };
    },
  });
  return { rpc: service.rpc, db: service.resources, close: service.close };
}

export function principal(overrides: Partial<identityV1.ResolvePrincipalRequest> = {}): identityV1.ResolvePrincipalRequest {
  return {
    issuer: 'https://idp.example.com/',
    subject: 'subject-1',
    email: 'user@example.com',
    displayName: 'A User',
    grantPlatformAdmin: false,
    ...overrides,
  };
}

export const { Role } = identityV1;
export const { status } = grpc;
export const MISSING_UUID = '00000000-0000-4000-8000-000000000000';
