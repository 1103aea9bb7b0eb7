import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHECKS } from '../../libs/idempotency/src/conformance/checks';
import { PROFILE_NAMES } from '../../libs/idempotency/src/conformance/options';
import { PROFILES } from '../../libs/idempotency/src/conformance/profiles';

const doc = readFileSync(join(__dirname, '../../docs/conformance.md'), 'utf8');

/** The check ids in a profile's table of docs/conformance.md (the table after the line that names the profile). */
function documented(profile: string): string[] {
  const start = doc.indexOf(`**\`${profile}\`**`);
  const table = doc.slice(start).split('\n\n')[1];
  return [...table.matchAll(/`([a-z-]+\.[a-z0-9-]+)`/g)].map((found) => found[1]).sort();
}

describe('docs/conformance.md', () => {
  it.each(PROFILE_NAMES)('lists exactly the checks of the %s profile', (profile) => {
    expect(documented(profile)).toEqual(PROFILES[profile].map((each) => each.check).sort());
  });

  it('names every check some profile makes, and every scenario', () => {
    for (const id of Object.keys(CHECKS)) expect(doc).toContain(`\`${id}\``);
    for (const scenario of new Set(Object.values(CHECKS).map((each) => each.scenario)))
      expect(doc).toContain(`| \`${scenario}\` |`);
  });
});
