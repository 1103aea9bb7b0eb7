import { PROBLEMS, problemTypeUri } from '../errors/outcomes';

/** The name of the shared problem-details schema in the OpenAPI document's `components.schemas`. */
export const PROBLEM_SCHEMA_NAME = 'IdempotencyProblem';

/** Every problem `type` URI the module answers with. */
export const PROBLEM_TYPE_URIS = [...new Set(Object.values(PROBLEMS).map(({ slug }) => problemTypeUri(slug)))];
