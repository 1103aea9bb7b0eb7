/**
 * The whole suite again on NestJS 12 (npm run test:nest12): NestJS 12 and its companions are installed from
 * test/nest12 into .cache/nest12, and every import of a package that tree holds is resolved there
 * (test/support/nest12-resolver.cjs). NestJS 12 ships ES modules only, which Jest's CommonJS runtime cannot load, so
 * its files (and the few ESM-only packages it brings) are compiled to CommonJS by swc as they load, the way the
 * suites' own TypeScript is. Processes the suites start load the same tree (NEST_MODULES, test/support/run-ts.cjs).
 */
const base = require('./jest.config.js');

const esmOnly = [
  '@nestjs',
  'file-type',
  'strtok3',
  'token-types',
  'uint8array-extras',
  'set-cookie-parser',
  'toad-cache',
];

module.exports = {
  ...base,
  resolver: '<rootDir>/test/support/nest12-resolver.cjs',
  transformIgnorePatterns: [
    `^(?!.*/\\.cache/nest12/node_modules/(${esmOnly.join('|')})/)(?!.*/node_modules/@nestjs/(event-emitter|schedule|bullmq|bull-shared)/).*/node_modules/`,
  ],
};
