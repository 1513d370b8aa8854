import type { Knex } from 'knex';
import * as grpc from '@grpc/grpc-js';
import {
  Readiness,
  call,
  createClient,
  createLogger,
  isServiceError,
  startGrpcServer,
  violationsOf,
  type Violation,
} from '@mail/common';
import { createTestPostgres } from '@mail/local';
import { brandguideV1 } from '@mail/proto';
import { brandGuideHandlers } from '../src/grpc/handlers';
import { openDatabase } from '../src/store/database';

type Client = brandguideV1.BrandGuideServiceClient;
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

export interface BrandGuideService {
  /** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
  rpc<K extends Method>(method: K, request: RequestOf<K>): Promise<ResponseOf<K>>;
  address: string;
  db: Knex;
  close(): Promise<void>;
}

/** The brand-guide handlers on 127.0.0.1:0 over a private database, with a readiness check named "postgres" as in main.ts. */
export async function startBrandGuideService(): Promise<BrandGuideService> {
  const postgres = await createTestPostgres('brand_guide');
  const db = await openDatabase(postgres.url);
  const implementation = brandGuideHandlers(createLogger('brand-guide', 'silent'), db);
  const server = await startGrpcServer(
    '127.0.0.1:0',
    [{ definition: brandguideV1.BrandGuideServiceService, implementation }],
    new Readiness().add('postgres', () => db.raw('select 1')),
  );
  const address = `127.0.0.1:${server.port}`;
  const client = createClient(brandguideV1.BrandGuideServiceClient, address);
  return {
    rpc: (method, request) => call((client[method] as unknown as Unary<typeof request, never>).bind(client), request),
    address,
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

export const { status } = grpc;
export const WORKSPACE_A = '0b6b5b8e-8a55-4c0e-9d3c-000000000001';
export const WORKSPACE_B = '0b6b5b8e-8a55-4c0e-9d3c-000000000002';
export const MISSING_UUID = '00000000-0000-4000-8000-000000000000';
