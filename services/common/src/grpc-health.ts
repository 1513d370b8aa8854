import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const HEALTH_PROTO = path.join(__dirname, '..', 'proto', 'grpc', 'health', 'v1', 'health.proto');

export enum ServingStatus {
  UNKNOWN = 0,
  SERVING = 1,
  NOT_SERVING = 2,
  SERVICE_UNKNOWN = 3,
}

export interface HealthCheckRequest {
  service: string;
}

type HealthClient = grpc.Client & {
  Check(
    request: HealthCheckRequest,
    options: Partial<grpc.CallOptions>,
    callback: (error: grpc.ServiceError | null, response: { status: ServingStatus }) => void,
  ): void;
};
let loaded: grpc.ServiceClientConstructor | undefined;

/** The standard grpc.health.v1.Health service, loaded from its .proto at run time. */
export function healthDefinition(): grpc.ServiceClientConstructor {
  if (!loaded) {
    const packageDefinition = protoLoader.loadSync(HEALTH_PROTO, { keepCase: true, enums: Number, defaults: true });
    const root = grpc.loadPackageDefinition(packageDefinition) as unknown as {
      grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
    };
    loaded = root.grpc.health.v1.Health;
  }
  return loaded;
}

/** A health client for one service address; `check(name)` resolves when SERVING and rejects otherwise. */
export function createHealthClient(address: string): { check(service?: string, timeoutMs?: number): Promise<void>; close(): void } {
  const Health = healthDefinition();
  const client = new Health(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
  return {
    check: (service = '', timeoutMs = 1_000) =>
      new Promise((resolve, reject) => {
        client.Check({ service }, { deadline: Date.now() + timeoutMs }, (error, response) => {
          if (error) return reject(error);
          if (response.status !== ServingStatus.SERVING) return reject(new Error(`${service || address} is not serving`));
          resolve();
        });
      }),
    close: () => client.close(),
  };
}
