/**
 * File paths as the workspace facts compare them (pure string work, no file system): forward slashes, a folder
 * without its trailing slash. Shared by the engine's stack resolution and the rules that ask whether a file belongs to
 * a training script's project (PL305, PL306).
 */

/** The path with forward slashes. */
export function slashed(path: string): string {
  return path.replace(/\\/g, '/');
}

/** The folder holding `path`: `/repo/proj/train.py` -> `/repo/proj`. */
export function folderOf(path: string): string {
  return slashed(path).replace(/\/[^/]*$/, '');
}

/** Whether `file` lies in `folder` or below it. */
export function isWithin(file: string, folder: string): boolean {
  return slashed(file).startsWith(`${slashed(folder).replace(/\/+$/, '')}/`);
}
