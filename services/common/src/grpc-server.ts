import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Logger } from './logger';
import { toServiceError } from './grpc-status';
import { grpcRequestDuration } from './metrics';
import type { Readiness } from './health';

type UnaryImpl<Req, Res> = (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>;

/**
 * Adapts async domain functions to grpc-js handlers: errors become status
 * codes (domain errors keep their meaning, anything else is INTERNAL with no
 * detail), and every call is timed.
 */
export function unary<Req, Res>(
  logger: Logger,
  method: string,
  impl: UnaryImpl<Req, Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const stopTimer = grpcRequestDuration.startTimer({ method });
    impl(call.request, call).then(
      (response) => {
        stopTimer({ code: 'OK' });
        callback(null, response);
      },
      (error: unknown) => {
        const serviceError = toServiceError(error);
        stopTimer({ code: grpc.status[serviceError.code] });
        if (serviceError.code === grpc.status.INTERNAL || serviceError.code === grpc.status.UNAVAILABLE) {
          logger.error({ err: error, method }, 'gRPC call failed');
        }
        callback(serviceError);
      },
    );
  };
}

const HEALTH_PROTO = path.join(__dirname, '..', 'proto', 'grpc', 'health', 'v1', 'health.proto');

enum ServingStatus {
  SERVING = 1,
  NOT_SERVING = 2,
}

/** grpc.health.v1.Health, answered from the process's readiness checks. */
function healthService(readiness: Readiness): { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation } {
  const packageDefinition = protoLoader.loadSync(HEALTH_PROTO, { keepCase: true, enums: Number, defaults: true });
  const loaded = grpc.loadPackageDefinition(packageDefinition) as unknown as {
    grpc: { health: { v1: { Health: { service: grpc.ServiceDefinition } } } };
  };
  const status = async (): Promise<{ status: ServingStatus }> => ({
    status: (await readiness.check()).ready ? ServingStatus.SERVING : ServingStatus.NOT_SERVING,
  });
  return {
    definition: loaded.grpc.health.v1.Health.service,
    implementation: {
      Check: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        status().then((s) => callback(null, s), () => callback(null, { status: ServingStatus.NOT_SERVING }));
      },
      Watch: (call: grpc.ServerWritableStream<unknown, unknown>) => {
        // A single answer then an open stream is enough for probes; they use Check.
        status().then((s) => call.write(s), () => call.write({ status: ServingStatus.NOT_SERVING }));
      },
    },
  };
}

export interface GrpcService {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

export interface RunningGrpcServer {
  port: number;
  /** Stops taking calls and waits for those in flight. */
  drain(timeoutMs: number): Promise<void>;
}

export async function startGrpcServer(
  address: string,
  services: GrpcService[],
  readiness: Readiness,
): Promise<RunningGrpcServer> {
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 30_000,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
  });
  for (const service of [...services, healthService(readiness)]) {
    server.addService(service.definition, service.implementation);
  }
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, boundPort) =>
      error ? reject(error) : resolve(boundPort),
    ),
  );
  return {
    port,
    drain: (timeoutMs) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, timeoutMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
