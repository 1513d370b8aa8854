import * as grpc from '@grpc/grpc-js';

type ClientConstructor<C> = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ClientOptions) => C;

/**
 * One long-lived channel per downstream service, spreading its calls over
 * every address the name resolves to. Behind a headless Kubernetes Service
 * that is one address per ready pod; with the default pick_first, every call
 * of the channel's life would go to the one pod it connected to first.
 */
export function createClient<C extends grpc.Client>(Ctor: ClientConstructor<C>, address: string): C {
  return new Ctor(address, grpc.credentials.createInsecure(), {
    'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    // Fail fast while a service restarts instead of queueing calls.
    'grpc.initial_reconnect_backoff_ms': 200,
    'grpc.max_reconnect_backoff_ms': 2_000,
  });
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** Promise form of a generated unary client method, with a deadline. */
export function call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, timeoutMs = 5_000): Promise<Res> {
  return new Promise((resolve, reject) => {
    method(request, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

export function isServiceError(error: unknown): error is grpc.ServiceError {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'number' && 'metadata' in error;
}
