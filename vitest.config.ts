import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests start real worker pools; two cores are shared by every file.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
