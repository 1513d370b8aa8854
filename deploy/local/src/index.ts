export * from './stack';
export * from './testing/databases';
export * from './testing/infra';
export * from './testing/grpc-service';
export * from './testing/close-race';
export * from './testing/jaeger';
export * from './testing/cluster';
export * from './testing/mailpit';
