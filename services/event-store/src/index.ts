export * from './client';
export * from './compaction';
export * from './proto-values';
export { ENGAGED_EVENTS } from './rollups';
export * from './schema';
export * from './settle';
export * from './suppression';
export * from './workspace-erasure';
export * as chsql from './sql';
