// The library's layering, checked by `npm run lint` (dependency-cruiser). Each rule names what it keeps apart.
const lib = '^libs/idempotency/src/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment: 'No import cycles: every file can be read from the files it imports.',
      severity: 'error',
      from: { path: lib },
      to: { circular: true },
    },
    {
      name: 'protocol-knows-no-transport',
      comment: 'The protocol (claim, run, complete) imports no HTTP, GraphQL or RPC code: those are the contexts.',
      severity: 'error',
      from: { path: `${lib}protocol/` },
      to: {
        path: [
          `${lib}contexts/`,
          'node_modules/(graphql|@nestjs/microservices|@nestjs/graphql|@nestjs/platform-express|@nestjs/platform-fastify|express|fastify)/',
        ],
      },
    },
    {
      name: 'stores-below-the-protocol',
      comment: 'The repository port and its stores never import the protocol, the contexts or the startup checks.',
      severity: 'error',
      from: { path: `${lib}(repository|dynamodb)/` },
      to: { path: `${lib}(protocol|contexts|startup|cli)/` },
    },
    {
      name: 'building-blocks-stay-low',
      comment:
        'Keys, responses, errors and options are building blocks: they import neither the protocol nor a context.',
      severity: 'error',
      from: { path: `${lib}(keys|response|errors|options)/` },
      to: { path: `${lib}(protocol|contexts|startup|cli|observability)/` },
    },
    {
      name: 'client-stands-alone',
      comment:
        'The retrying client (nestjs-dynamodb-idempotency/client) runs where Nest and the AWS SDK are not installed: ' +
        'it imports its own files, the outcomes table and the constants, and no package.',
      severity: 'error',
      from: { path: `${lib}client/`, pathNot: '\\.spec\\.ts$' },
      to: {
        pathNot: [`${lib}client/`, `${lib}errors/outcomes\\.ts$`, `${lib}idempotency\\.constants\\.ts$`],
      },
    },
    {
      name: 'conformance-stands-alone',
      comment:
        'The conformance kit (`npx nestjs-dynamodb-idempotency conformance`) checks any running API from outside and ' +
        'runs where Nest and the AWS SDK are not installed: it imports its own files and Node.js, nothing else.',
      severity: 'error',
      from: { path: `${lib}conformance/` },
      to: { pathNot: [`${lib}conformance/`], dependencyTypesNot: ['core'] },
    },
    {
      name: 'library-not-the-demo',
      comment: 'Nothing in the library imports the demo or the tests.',
      severity: 'error',
      from: { path: '^libs/' },
      to: { path: '^(apps|test)/' },
    },
    {
      name: 'demo-through-the-public-api',
      comment: 'The demo reaches the library only through its public entry points, as a user would.',
      severity: 'error',
      from: { path: '^apps/' },
      to: { path: `${lib}`, pathNot: `${lib}(index|testing/index|client/index)\\.ts$` },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },
};
