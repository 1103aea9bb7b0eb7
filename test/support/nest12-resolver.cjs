// Jest's resolver for npm run test:nest12 (jest.nest12.config.js): a package the Nest 12 tree (.cache/nest12) holds is
// taken from there, whoever asks for it, so the suites, the library and the packages they share objects with (rxjs,
// reflect-metadata, graphql) meet one NestJS 12; everything else resolves as usual, from the workspace.
const path = require('node:path');

const tree = path.resolve(__dirname, '../../.cache/nest12');
const bare = /^(?![./]|node:)/;

module.exports = (request, options) => {
  if (bare.test(request) && !options.basedir.startsWith(tree)) {
    try {
      return options.defaultResolver(request, { ...options, basedir: tree });
    } catch {
      // not in the tree: the workspace's own
    }
  }
  return options.defaultResolver(request, options);
};
