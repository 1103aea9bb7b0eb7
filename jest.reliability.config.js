/** `npm run test:reliability`: multi-process scenarios against the built demo (`npm run build` first). */
const base = require('./jest.config');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/reliability'],
  testRegex: '.*\\.reliability-spec\\.ts$',
  testTimeout: 120000,
};
