/** Types of scripts/gen-large-model.mjs for the tests that import it. */
export function prng(seed: number): () => number;
export function generateModelFile(options: { lines: number; seed: number }): string;
export function generateLargeClass(options: { layers: number; shape: 'flat' | 'multiline' | 'broken' }): string;
