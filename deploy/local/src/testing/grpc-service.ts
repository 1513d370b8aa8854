import type * as grpc from '@grpc/grpc-js';
import { Readiness, call, createClient, isServiceError, startGrpcServer, violationsOf, type Violation } from '@mail/common';

/**
 * The common part of the services' test harnesses: one service's real gRPC
 * server on 127.0.0.1:0 over a private database, a client for it, and the
 * teardown of all of it.
 */

type ClientConstructor<C> = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ClientOptions) => C;

// The generated client's last overload is (request, metadata, options, callback), the one `call` uses.
type Unary<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** The unary methods of a generated client. */
export type UnaryMethodName<C> = { [K in keyof C]: C[K] extends Unary<infer _Req, infer _Res> ? K : never }[keyof C];
export type RequestOf<C, K extends UnaryMethodName<C>> = C[K] extends Unary<infer Req, infer _Res> ? Req : never;
export type ResponseOf<C, K extends UnaryMethodName<C>> = C[K] extends Unary<infer _Req, infer Res> ? Res : never;

/** Calls one RPC through the real gRPC server, so the proto mapping is part of every test. */
export type Rpc<C> = <K extends UnaryMethodName<C>>(method: K, request: RequestOf<C, K>) => Promise<ResponseOf<C, K>>;

/** What a harness builds over its private database: the handlers to serve, and what the test may use directly. */
export interface TestServiceParts<R> {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
  /** The server's readiness checks; none unless given. */
  readiness?: Readiness;
  /** Handed back to the harness as is (database handles and the like). */
  resources: R;
  /** Closes what was opened for the handlers; runs after the server drained, before the database is dropped. */
  close(): Promise<void>;
}

export interface TestGrpcServiceOptions<C, D extends { drop(): Promise<void> }, R> {
  /** Creates the private database, e.g. `() => createTestPostgres('identity')`. */
  database: () => Promise<D>;
  /** Opens the handlers over the database. */
  open(database: D): Promise<TestServiceParts<R>>;
  /** The generated client class. */
  client: ClientConstructor<C>;
}

export interface TestGrpcService<C, D, R> {
  rpc: Rpc<C>;
  client: C;
  /** host:port of the server. */
  address: string;
  database: D;
  resources: R;
  /** Closes the client, drains the server, closes the parts and drops the database; needs no `this`, so harnesses hand it on. */
  close: () => Promise<void>;
}

/** Starts one service's handlers on 127.0.0.1:0 over a private database; a failed start drops the database again. */
export async function startTestGrpcService<C extends grpc.Client, D extends { drop(): Promise<void> }, R>(
  options: TestGrpcServiceOptions<C, D, R>,
): Promise<TestGrpcService<C, D, R>> {
  const database = await options.database();
  let parts: TestServiceParts<R> | undefined;
  try {
    parts = await options.open(database);
    const server = await startGrpcServer(
      '127.0.0.1:0',
      [{ definition: parts.definition, implementation: parts.implementation }],
      parts.readiness ?? new Readiness(),
    );
    const address = `127.0.0.1:${server.port}`;
    const client = createClient(options.client, address);
    const opened = parts;
    return {
      rpc: (method, request) => call((client[method] as unknown as Unary<typeof request, never>).bind(client), request),
      client,
      address,
      database,
      resources: opened.resources,
      close: async () => {
        client.close();
        await server.drain(1_000);
        await opened.close();
        await database.drop();
      },
    };
  } catch (error) {
    await parts?.close().catch(() => undefined);
    await database.drop().catch(() => undefined);
    throw error;
  }
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
