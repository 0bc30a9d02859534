import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RULE_CODES } from '../../common/codes';
import { DEFAULT_SETTINGS, resolveSettings, SETTINGS_SECTION } from '../../common/settings';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));

/** `te.apiVersion`-style keys of the settings object (rules is one object-valued key). */
function flatKeys(obj: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(obj).flatMap(([k, v]) =>
    v && typeof v === 'object' && k !== 'rules' && k !== 'dims' ? flatKeys(v as Record<string, unknown>, `${prefix}${k}.`) : [`${prefix}${k}`]);
}

describe('settings: one source of truth', () => {
  it('package.json contributes exactly the keys of common/settings.ts (plus trace.server)', () => {
    const declared = Object.keys(pkg.contributes.configuration.properties).map((k) => k.slice(SETTINGS_SECTION.length + 1)).sort();
    const expected = [...flatKeys(DEFAULT_SETTINGS as unknown as Record<string, unknown>), 'trace.server'].sort();
    assert.deepEqual(declared, expected);
  });

  it('package.json defaults equal DEFAULT_SETTINGS', () => {
    const props = pkg.contributes.configuration.properties;
    for (const key of flatKeys(DEFAULT_SETTINGS as unknown as Record<string, unknown>)) {
      const value = key.split('.').reduce<any>((o, k) => o[k], DEFAULT_SETTINGS);
      assert.deepEqual(props[`${SETTINGS_SECTION}.${key}`].default, value, key);
    }
  });

  it('resolveSettings keeps valid values and drops malformed ones', () => {
    const s = resolveSettings({ rules: { PL101: 'off', PL201: 'error', PL999: 'off', PL102: 'loud' }, te: { apiVersion: 'legacy', recipe: 'nope' }, targetGpu: 'hopper', maxFileSize: -1 });
    assert.deepEqual(s.rules, { PL101: 'off', PL201: 'error' });
    assert.equal(s.te.apiVersion, 'legacy');
    assert.equal(s.te.recipe, DEFAULT_SETTINGS.te.recipe);
    assert.equal(s.targetGpu, 'hopper');
    assert.equal(s.maxFileSize, DEFAULT_SETTINGS.maxFileSize);
    assert.deepEqual(resolveSettings(null), DEFAULT_SETTINGS);
  });

  it('resolveSettings keeps declared dims that are positive integers (or lists of them) under identifier names', () => {
    const s = resolveSettings({ dims: { hidden_size: 4096, 'config.dim': 1024, presets: [768, 1024], bad: -3, half: 1.5, 'x y': 8, empty: [], mixed: [8, 'a'] } });
    assert.deepEqual(s.dims, { hidden_size: 4096, 'config.dim': 1024, presets: [768, 1024] });
    assert.deepEqual(resolveSettings({ dims: [1, 2] }).dims, {});
  });

  it('the README rule table lists every code', () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
    for (const code of RULE_CODES) assert.match(readme, new RegExp(`\\| \\[?${code}\\b`), code);
  });
});
