/** One Jest run for everything `npm test` covers: unit specs beside the code, e2e specs under test/. */
module.exports = {
  testEnvironment: 'node',
  rootDir: '.',
  roots: ['<rootDir>/libs', '<rootDir>/apps', '<rootDir>/test'],
  testRegex: '.*\\.(spec|e2e-spec)\\.ts$',
  transform: {
    '^.+\\.ts$': ['@swc/jest'],
    // Packages that ship ES modules only, compiled to CommonJS as they load (Jest's runtime is CommonJS).
    '^.+\\.js$': [
      '@swc/jest',
      { swcrc: false, module: { type: 'commonjs' }, jsc: { target: 'es2022', parser: { syntax: 'ecmascript' } } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!@nestjs/(event-emitter|schedule|bullmq|bull-shared)/)'],
  moduleNameMapper: {
    '^nestjs-dynamodb-idempotency$': '<rootDir>/libs/idempotency/src',
    '^nestjs-dynamodb-idempotency/testing$': '<rootDir>/libs/idempotency/src/testing',
    '^nestjs-dynamodb-idempotency/client$': '<rootDir>/libs/idempotency/src/client',
    '^nestjs-dynamodb-idempotency/lambda$': '<rootDir>/libs/idempotency/src/lambda',
    // @fastify/static 10 (Swagger UI on the Fastify demo) requires glob 14 and content-disposition 2, ES modules only:
    // Node loads them (require(esm)), Jest's CommonJS runtime cannot. Under Jest it gets glob 13 (the same API, with a
    // CommonJS build, hoisted to the root) and content-disposition 1 (test/support/content-disposition.cjs).
    '^glob$': '<rootDir>/node_modules/glob/dist/commonjs/index.js',
    '^content-disposition$': '<rootDir>/test/support/content-disposition.cjs',
  },
  modulePathIgnorePatterns: ['<rootDir>/dist', '<rootDir>/libs/idempotency/dist'],
  setupFiles: ['<rootDir>/test/support/jest.setup.ts'],
  // One DynamoDB Local for the run when java 17+ is on PATH (its suites are skipped, saying so, otherwise).
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30000,
};
