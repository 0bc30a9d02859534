/**
 * The Transformer Engine version of the environment the CLI checks for, without starting Python: the
 * PRECISION_LENS_TE_VERSION variable, else the `transformer_engine-X.Y.Z.dist-info` (or `transformer_engine_torch`,
 * `transformer_engine_cu12`) folder of the active virtual environment or conda prefix. Undefined when unknown.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const DIST_INFO = /^transformer_engine(?:_torch|_cu\d+)?-(\d+\.\d+(?:\.\d+)?)[^/]*\.dist-info$/;

/** site-packages folders of a prefix (venv or conda): lib/python3.X/site-packages, Lib/site-packages (Windows). */
function sitePackages(prefix: string): string[] {
  const out = [join(prefix, 'Lib', 'site-packages')];
  try {
    for (const name of readdirSync(join(prefix, 'lib'))) if (/^python3\.\d+$/.test(name)) out.push(join(prefix, 'lib', name, 'site-packages'));
  } catch {
    // no lib/ folder
  }
  return out;
}

export function teVersionFromEnvironment(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const declared = env.PRECISION_LENS_TE_VERSION?.trim();
  if (declared && /^\d+\.\d+/.test(declared)) return declared;
  for (const prefix of [env.VIRTUAL_ENV, env.CONDA_PREFIX]) {
    if (!prefix) continue;
    for (const dir of sitePackages(prefix)) {
      let names: string[];
      try { names = readdirSync(dir); } catch { continue; }
      for (const name of names) {
        const m = DIST_INFO.exec(name);
        if (m) return m[1];
      }
    }
  }
  return undefined;
}
