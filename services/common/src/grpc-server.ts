import * as grpc from '@grpc/grpc-js';
import type { Logger } from './logger';
import { toServiceError } from './grpc-status';
import { grpcRequestDuration } from './metrics';
import type { Readiness } from './health';
import { healthDefinition, ServingStatus, type HealthCheckRequest } from './grpc-health';

type UnaryImpl<Req, Res> = (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>;

/**
 * Adapts async domain functions to grpc-js handlers: errors become status
 * codes (domain errors keep their meaning, anything else is INTERNAL with no
 * detail), and every call is timed.
 */
export function unary<Req, Res>(logger: Logger, method: string, impl: UnaryImpl<Req, Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const stopTimer = grpcRequestDuration.startTimer({ method });
    impl(call.request, call).then(
      (response) => {
        stopTimer({ code: 'OK' });
        logger.debug({ method, code: 'OK' }, 'gRPC call answered');
        callback(null, response);
      },
      (error: unknown) => callback(failedCall(logger, method, stopTimer, error)),
    );
  };
}

/**
 * The status a call that threw ends with, timed; the server's own faults are
 * logged as errors, a client's mistakes only at debug level.
 */
function failedCall(logger: Logger, method: string, stopTimer: (labels: { code: string }) => void, error: unknown): grpc.ServiceError {
  const serviceError = toServiceError(error);
  const code = grpc.status[serviceError.code];
  stopTimer({ code });
  if (serviceError.code === grpc.status.INTERNAL || serviceError.code === grpc.status.UNAVAILABLE) {
    logger.error({ err: error, method }, 'gRPC call failed');
  } else {
    logger.debug({ method, code }, 'gRPC call answered');
  }
  return serviceError;
}

/**
 * A server-streaming handler from an async generator: each yielded message
 * is written once the client takes the previous ones (backpressure), a
 * cancelled call stops the generator, and an error ends the call with its
 * status, as unary's do.
 */
export function serverStream<Req, Res>(
  logger: Logger,
  method: string,
  impl: (request: Req, call: grpc.ServerWritableStream<Req, Res>) => AsyncIterable<Res>,
): grpc.handleServerStreamingCall<Req, Res> {
  return (call) => {
    const stopTimer = grpcRequestDuration.startTimer({ method });
    const run = async () => {
      for await (const message of impl(call.request, call)) {
        if (call.cancelled) return;
        if (!call.write(message)) {
          await new Promise((resolve) => {
            call.once('drain', resolve);
            call.once('cancelled', resolve);
          });
        }
      }
    };
    run().then(
      () => {
        stopTimer({ code: 'OK' });
        call.end();
      },
      (error: unknown) => call.emit('error', failedCall(logger, method, stopTimer, error)),
    );
  };
}

/**
 * grpc.health.v1.Health, answered from the process's readiness checks. The
 * empty service name is the whole process; a dependency name (e.g.
 * "postgres") is that dependency alone, so callers can say what is down.
 */
function healthService(readiness: Readiness): GrpcService {
  const status = async (service: string): Promise<{ status: ServingStatus } | undefined> => {
    if (service === '') return { status: (await readiness.check()).ready ? ServingStatus.SERVING : ServingStatus.NOT_SERVING };
    const state = await readiness.checkOne(service);
    return state && { status: state === 'up' ? ServingStatus.SERVING : ServingStatus.NOT_SERVING };
  };
  return {
    definition: healthDefinition().service,
    implementation: {
      Check: (call: grpc.ServerUnaryCall<HealthCheckRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        status(call.request.service).then(
          (answer) => (answer ? callback(null, answer) : callback({ code: grpc.status.NOT_FOUND, details: 'unknown service' })),
          () => callback(null, { status: ServingStatus.NOT_SERVING }),
        );
      },
      Watch: (call: grpc.ServerWritableStream<HealthCheckRequest, unknown>) => {
        // One answer on an open stream is enough for probes; they use Check.
        status(call.request.service).then(
          (answer) => call.write(answer ?? { status: ServingStatus.SERVICE_UNKNOWN }),
          () => call.write({ status: ServingStatus.NOT_SERVING }),
        );
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

/** How long a client connection is kept before the server asks the client to reconnect (grpc-js adds ±10% jitter). */
const MAX_CONNECTION_AGE_MS = 5 * 60_000;

export async function startGrpcServer(address: string, services: GrpcService[], readiness: Readiness): Promise<RunningGrpcServer> {
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 30_000,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    // Clients resolve a headless Service's pods again only when a connection closes: closing each one
    // after a while (calls in flight finish first) lets them find pods added since.
    'grpc.max_connection_age_ms': MAX_CONNECTION_AGE_MS,
  });
  for (const service of [...services, healthService(readiness)]) {
    server.addService(service.definition, service.implementation);
  }
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, boundPort) => (error ? reject(error) : resolve(boundPort))),
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
