// nestjs-dynamodb-idempotency/testing: for people who bring their own store, or test their app without DynamoDB.
export { describeRepositoryContract } from './repository-contract';
export type { ContractOptions, ContractSubject, TestFunctions } from './repository-contract';
export { ManualClock } from './manual-clock';
export { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
