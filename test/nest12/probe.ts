/** Prints where `@nestjs/core` loads from in a process started by test/support/run-ts.cjs (npm run test:nest12). */
import { dirname } from 'node:path';

console.log(dirname(require.resolve('@nestjs/core')));
