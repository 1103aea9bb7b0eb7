/**
 * The second measure of the simulation's power (issue 63 §3): StrykerJS with the protocol simulation as the only test
 * (`stryker.simulation.config.json`). Every mutant of the in-memory repository, the record's rules and the step journal
 * is judged by the simulation alone, at the budget `npm test` gives it (3,000 sequences in memory).
 */
const base = require('./jest.mutation.config');
module.exports = {
  ...base,
  testRegex: 'test/simulation/protocol-simulation\\.e2e-spec\\.ts$',
  testPathIgnorePatterns: ['/node_modules/'],
};
