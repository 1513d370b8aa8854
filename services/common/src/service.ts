import { EnvReader, readProcessConfig, type ProcessConfig } from './config';
import { createLogger, type Logger } from './logger';
import { Readiness } from './health';
import { startGrpcServer, type GrpcService } from './grpc-server';
import { startOpsServer } from './ops-server';
import { onShutdown, type ShutdownStep } from './shutdown';

export interface ServiceParts {
  grpcServices: GrpcService[];
  /** Closes pools and clients, after the gRPC server drained. */
  close: ShutdownStep[];
}

export interface ServiceDefinition {
  name: string;
  grpcAddressVariable: string;
  defaults: { grpcAddress: string; opsPort: number };
  /** Connects to dependencies and registers their readiness checks. */
  start(context: { env: EnvReader; logger: Logger; readiness: Readiness; config: ProcessConfig }): Promise<ServiceParts>;
  /**
   * Brings the service's schema up to date and returns (MIGRATE_ONLY=1). When
   * absent, start() is run and closed again: fine for services whose start-up
   * does nothing but connect and migrate.
   */
  migrate?(context: { env: EnvReader; logger: Logger }): Promise<void>;
}

/**
 * The life of every gRPC service process: read config, connect, serve gRPC
 * with grpc.health.v1, serve /metrics, /healthz and /readyz, and on SIGTERM
 * report not-ready, drain calls, then close. With MIGRATE_ONLY=1 it only
 * connects (which migrates), closes and exits.
 */
export async function runService(definition: ServiceDefinition, env = new EnvReader()): Promise<void> {
  const config = readProcessConfig(env, definition.name, definition.grpcAddressVariable, definition.defaults);
  const logger = createLogger(definition.name, config.logLevel);
  try {
    const readiness = new Readiness();
    if (env.bool('MIGRATE_ONLY')) {
      // A deploy Job runs this once before rolling out.
      if (definition.migrate) {
        await definition.migrate({ env, logger });
      } else {
        const parts = await definition.start({ env, logger, readiness, config });
        for (const step of parts.close) await step.run();
      }
      logger.info(`${definition.name} schema is up to date (MIGRATE_ONLY=1), exiting`);
      process.exit(0);
    }
    const parts = await definition.start({ env, logger, readiness, config });
    const grpcServer = await startGrpcServer(config.grpcAddress, parts.grpcServices, readiness);
    const opsServer = await startOpsServer(config.opsPort, readiness);
    onShutdown(logger, config.shutdownTimeoutMs, [
      { name: 'mark not ready', run: () => Promise.resolve(readiness.markDraining()) },
      { name: 'drain gRPC', run: () => grpcServer.drain(config.shutdownTimeoutMs / 2) },
      { name: 'close ops server', run: () => new Promise((resolve) => opsServer.close(resolve)) },
      ...parts.close,
    ]);
    const address = opsServer.address();
    logger.info(
      { grpcPort: grpcServer.port, opsPort: typeof address === 'object' && address ? address.port : config.opsPort },
      `${definition.name} listening`,
    );
  } catch (error) {
    logger.fatal({ err: error }, `${definition.name} failed to start`);
    process.exit(1);
  }
}
