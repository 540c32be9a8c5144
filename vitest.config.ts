import { defineConfig } from 'vitest/config';

// Unit and component tests run in parallel; integration tests start whole meshes of
// processes, so they run one file at a time on these 2-core machines.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['*/src/**/*.test.ts', 'deploy/*/src/**/*.test.ts'],
          exclude: ['**/node_modules/**', '**/dist/**', 'integration-tests/**', 'gateway/src/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          // The gateway's tests drive whole meshes of processes too.
          include: ['integration-tests/src/**/*.test.ts', 'gateway/src/**/*.test.ts'],
          fileParallelism: false,
        },
      },
    ],
  },
});
