/**
 * Spawning a child that can be killed with everything it started, and killing it.
 * POSIX: the child leads its own process group (`detached: true`), so `kill(-pid)` reaches its grandchildren
 * (torch.compile workers, dataloader workers). Windows: `taskkill /T /F` walks the tree.
 * Pure Node: no `vscode` import (unit-tested against real processes).
 */
import { ChildProcess, spawn, SpawnOptions } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export const IS_WINDOWS = process.platform === 'win32';

/** Spawns `command args` as the leader of a new process group (POSIX) with piped stdio. */
export function spawnTree(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  return spawn(command, args, {
    ...options,
    detached: !IS_WINDOWS,
    windowsHide: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Whether `pid` names a live process (a zombie waiting to be reaped counts as gone). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  if (process.platform === 'linux') {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Field 3, after the parenthesised command name (which may itself contain spaces or parentheses).
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      return state !== 'Z' && state !== 'X';
    } catch {
      return false;
    }
  }
  return true;
}

/** Whether any live process remains in process group `pgid` (POSIX). */
export function isGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  if (process.platform === 'linux') return groupMembers(pgid).some(isProcessAlive);
  return true;
}

/** Pids whose process group is `pgid` (Linux, from /proc). */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [pgid];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // fields[0] = state, [1] = ppid, [2] = pgrp
      if (Number(fields[2]) === pgid) members.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return members;
}

export interface KillTreeOptions {
  /** Time between SIGTERM and SIGKILL, ms. */
  graceMs?: number;
  /** Poll interval while waiting for the group to exit, ms. */
  pollMs?: number;
}

/**
 * Terminates the process tree rooted at `pid` (spawned with `spawnTree`): SIGTERM to the group, SIGKILL to whatever
 * is left after the grace period. Resolves when nothing of the group is alive (or, on Windows, when taskkill ends).
 */
export async function killProcessTree(pid: number, options: KillTreeOptions = {}): Promise<void> {
  const graceMs = options.graceMs ?? 3000;
  const pollMs = options.pollMs ?? 50;
  if (IS_WINDOWS) {
    await new Promise<void>((resolve) => {
      const killer = spawn('taskkill', ['/pid', String(pid), '/T', '/F'], { windowsHide: true, stdio: 'ignore' });
      killer.on('exit', () => resolve());
      killer.on('error', () => {
        try {
          process.kill(pid);
        } catch {
          // already gone
        }
        resolve();
      });
    });
    return;
  }
  signalGroup(pid, 'SIGTERM');
  if (await waitUntil(() => !isGroupAlive(pid), graceMs, pollMs)) return;
  signalGroup(pid, 'SIGKILL');
  await waitUntil(() => !isGroupAlive(pid), 2000, pollMs);
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Not a group leader (or already gone): signal the process itself.
    try {
      process.kill(pgid, signal);
    } catch {
      // gone
    }
  }
}

/** Polls `condition` until it holds or `timeoutMs` passes; resolves whether it held. */
export async function waitUntil(condition: () => boolean, timeoutMs: number, pollMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (condition()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
