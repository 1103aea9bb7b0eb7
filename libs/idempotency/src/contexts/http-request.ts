import { fingerprintRequest } from '../fingerprint';

/** SHA-256 of an HTTP request as the handler can read it: method, route, parameters, query and parsed body. */
export async function requestFingerprint(request: any, method: string, route: string): Promise<string> {
  return fingerprintRequest({ method, route, params: request.params, query: request.query, body: request.body });
}
