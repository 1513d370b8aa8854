/**
 * One jest run over every package's test/ folder. Tests talk to the real
 * servers started by deploy/local/infra.sh (the test command starts them).
 * The cluster tests (deploy/cluster-test) have their own run after it, one
 * at a time: jest.cluster.config.js (deploy/local/test.sh, `npm run test:cluster`).
 */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/services', '<rootDir>/gateway', '<rootDir>/deploy', '<rootDir>/bench'],
  testMatch: ['**/test/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '<rootDir>/deploy/cluster-test/'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }],
  },
  testTimeout: 60_000,
  maxWorkers: 2,
};
