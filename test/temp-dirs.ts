/**
 * Temporary folders for tests, removed when the test process exits (passed, failed or stopped by mocha): a test run
 * leaves nothing behind in the temp folder.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];
let hooked = false;

/** A new folder under the OS temp folder, named `<prefix>XXXXXX`, removed at process exit. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const d of made) {
        try { rmSync(d, { recursive: true, force: true }); } catch { /* already gone */ }
      }
    });
  }
  return dir;
}
