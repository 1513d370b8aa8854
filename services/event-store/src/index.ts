export * from './client';
export * from './compaction';
export * from './layout';
export * from './proto-values';
export * from './schema';
export * from './settle';
export * from './suppression';
export * from './workspace-erasure';
export * as chsql from './sql';
