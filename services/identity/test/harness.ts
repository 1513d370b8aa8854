import type { Knex } from 'knex';
import * as grpc from '@grpc/grpc-js';
import { Readiness, call, createClient, createLogger, isServiceError, startGrpcServer, violationsOf, type Violation } from '@mail/common';
import { createTestPostgres } from '@mail/local';
import { identityV1 } from '@mail/proto';
import { identityHandlers } from '../src/grpc/handlers';
import { openDatabase } from '../src/store/database';

type Client = identityV1.IdentityServiceClient;
// The generated client's last overload is (request, metadata, options, callback), the one `call` uses.
type Unary<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;
type Method = { [K in keyof Client]: Client[K] extends Unary<infer _Req, infer _Res> ? K : never }[keyof Client];
type RequestOf<K extends Method> = Client[K] extends Unary<infer Req, infer _Res> ? Req : never;
type ResponseOf<K extends Method> = Client[K] extends Unary<infer _Req, infer Res> ? Res : never;

export interface Identity {
  /** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
  rpc<K extends Method>(method: K, request: RequestOf<K>): Promise<ResponseOf<K>>;
  db: Knex;
  close(): Promise<void>;
}

/** The identity handlers on 127.0.0.1:0 over a private database. */
export async function startIdentity(bootstrapPlatformAdmins: string[] = []): Promise<Identity> {
  const postgres = await createTestPostgres('identity');
  const db = await openDatabase(postgres.url);
  const implementation = identityHandlers(createLogger('identity', 'silent'), db, {
    bootstrapPlatformAdmins: new Set(bootstrapPlatformAdmins),
  });
  const server = await startGrpcServer(
    '127.0.0.1:0',
    [{ definition: identityV1.IdentityServiceService, implementation }],
    new Readiness(),
  );
  const client = createClient(identityV1.IdentityServiceClient, `127.0.0.1:${server.port}`);
  return {
    rpc: (method, request) => call((client[method] as unknown as Unary<typeof request, never>).bind(client), request),
    db,
    close: async () => {
      client.close();
      await server.drain(1_000);
      await db.destroy();
      await postgres.drop();
    },
  };
}

export interface Failure {
  code: grpc.status;
  details: string;
  violations: Violation[];
}

/** The status a call failed with; fails the test when the call succeeds. */
export async function failure(promise: Promise<unknown>): Promise<Failure> {
  try {
    await promise;
  } catch (error) {
    if (!isServiceError(error)) throw error;
    return { code: error.code, details: error.details, violations: violationsOf(error) };
  }
  throw new Error('expected the call to fail');
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
