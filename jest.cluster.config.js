/**
 * The cluster tests (deploy/cluster-test), run by `npm run test:cluster`
 * (deploy/local/test-cluster.sh) and after the rest of `npm test`: they need
 * the local clusters of infra.sh and SIGKILL their nodes, so they run one at a
 * time, in a jest run of their own.
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
