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

/** The process's readiness as its last check found it (each /readyz and gRPC health check: the probes', every few seconds). */
export const readinessMetrics = {
  ready: new client.Gauge({
    name: 'readiness_ready',
    help: '1 while the process reports ready, 0 while not (a dependency down, or draining)',
    registers: [registry],
  }),
  dependencyUp: new client.Gauge({
    name: 'readiness_dependency_up',
    help: '1 while the dependency answers its readiness check, 0 while not',
    labelNames: ['dependency'],
    registers: [registry],
  }),
};

export { client as prometheus };
