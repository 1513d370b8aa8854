export * from './testing/databases';
export * from './testing/infra';
