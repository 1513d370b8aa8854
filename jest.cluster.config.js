/**
 * The cluster tests (deploy/cluster-test), run last by `npm test` and alone by
 * `npm run test:cluster` (deploy/local/test.sh, test-cluster.sh): they need the
 * local clusters of infra.sh and SIGKILL their nodes, so they run one at a time
 * and outside the root jest config.
 */
const base = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  roots: ['<rootDir>/deploy/cluster-test'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  maxWorkers: 1,
};
