/**
 * The optional peer dependencies, loaded only where a call of their kind runs: a GraphQL call means the application has
 * `graphql`, a message handler that it has `@nestjs/microservices`. An application without them never loads them.
 */
/* eslint-disable @typescript-eslint/no-require-imports -- loaded on first use, so that they stay optional */
export const loadGraphql = () => require('graphql') as typeof import('graphql');
export const loadMicroservices = () => require('@nestjs/microservices') as typeof import('@nestjs/microservices');
/* eslint-enable @typescript-eslint/no-require-imports */
