import { PROBLEMS, problemTypeUri } from '../errors/outcomes';

/** The module's in-flight problem type: a 409 that says the first request with the key still runs. */
export const IN_FLIGHT_PROBLEM_TYPE = problemTypeUri(PROBLEMS.in_flight.slug);
