import client from 'prom-client';

/** One registry per process; default Node metrics plus the shared RPC timings. */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });

export const grpcRequestDuration = new client.Histogram({
  name: 'grpc_server_handling_seconds',
  help: 'Time to handle a unary gRPC call',
  labelNames: ['method', 'code'],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [registry],
});

export { client as prometheus };
