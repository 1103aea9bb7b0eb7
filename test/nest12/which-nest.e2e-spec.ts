import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The NestJS major the suite runs on: 11 under `npm test`, 12 under `npm run test:nest12` (which sets NEST_MAJOR to
 * 12 and resolves Nest from the tree it installs). Without this, a resolver that quietly fell back to the workspace's
 * Nest 11 would make the Nest 12 run prove nothing.
 */
describe('the NestJS the suite runs on', () => {
  const expected = process.env.NEST_MAJOR ?? '11';

  it.each(['@nestjs/core', '@nestjs/common', '@nestjs/testing', '@nestjs/platform-express'])(
    `%s is NestJS ${expected}`,
    (name) => {
      const entry = require.resolve(name);
      const manifest = JSON.parse(readFileSync(join(dirname(entry), 'package.json'), 'utf8')) as { version: string };
      expect(manifest.version.split('.')[0]).toBe(expected);
    },
  );
});
