/**
 * The A/B run's comparison with its peer (`precision-lens measure`, the sidebar's "Measure conversion"): the converted
 * project's tokens/s against torchao float8 training on the original (`torchao-original`), measured in the same
 * process, and the one-line verdict. `measure` runs the peer under torch.compile even beside eager arms (torchao's
 * best configuration), so the line says which configuration it was. Shared by the CLI (server/src/cli/measure.ts),
 * the extension host and the webview: no `vscode` or Node imports here.
 */
import { compiledOf, PEER_ARM, type BackendResult } from './bench-events';

/**
 * The benchmark's `--peer` for a `measure` run (the CLI's options, the sidebar's "Measure conversion"): as given;
 * `none` for a loss check that does not ask for the peer (it runs the BF16 arm again instead); undefined otherwise
 * (the benchmark's `auto`: torchao where it imports).
 */
export function measurePeer(options: { peer?: 'torchao' | 'none'; lossCheck?: boolean }): 'torchao' | 'none' | undefined {
  return options.peer ?? (options.lossCheck ? 'none' : undefined);
}

/** From this ratio to PEER_EVEN_HIGH (both included), the conversion is "about even" with the peer; below, behind. */
export const PEER_EVEN_LOW = 0.97;
/** Above this ratio, the conversion is ahead of the peer. */
export const PEER_EVEN_HIGH = 1.03;

export interface PeerComparison {
  /** converted tokens/s / peer tokens/s: > 1, the conversion is ahead. */
  ratio: number;
  /** Whether the peer ran under torch.compile; undefined where its result does not say. */
  peerCompiled?: boolean;
}

/** The converted arm against the torchao peer, or undefined when either did not run (or FP8 was emulated). */
export function peerComparison(results: readonly BackendResult[]): PeerComparison | undefined {
  const get = (arm: string) => results.find((r) => r.backend === arm && !r.skippedReason);
  const conv = get('converted');
  const peer = get(PEER_ARM);
  if (!conv || !peer || conv.emulated || peer.emulated) return undefined;
  const c = conv.tokensPerS;
  const p = peer.tokensPerS;
  if (c === undefined || p === undefined || !(c > 0) || !(p > 0)) return undefined;
  return { ratio: c / p, peerCompiled: compiledOf(peer) };
}

/**
 * The verdict on the conversion against torchao on the original, e.g. "FP8 conversion: 1.06x the tokens/s of torchao
 * (compiled) on the original, same process: the conversion is ahead." Undefined when the peer did not run.
 */
export function peerVerdict(results: readonly BackendResult[]): string | undefined {
  const cmp = peerComparison(results);
  if (!cmp) return undefined;
  const { ratio, peerCompiled } = cmp;
  const peer = peerCompiled === undefined ? 'torchao' : `torchao (${peerCompiled ? 'compiled' : 'eager'})`;
  if (ratio < PEER_EVEN_LOW) {
    const how = peerCompiled ? 'torch.compile with torchao\'s convert_to_float8_training' : 'torchao\'s convert_to_float8_training';
    return `${peer} on the original is ${(1 / ratio).toFixed(2)}x faster than this conversion: for this model, ${how} trains faster.`;
  }
  const verdict = ratio <= PEER_EVEN_HIGH ? `about even with ${peer}` : 'the conversion is ahead';
  return `FP8 conversion: ${ratio.toFixed(2)}x the tokens/s of ${peer} on the original, same process: ${verdict}.`;
}
