/**
 * The verdict as a list of small named checks (DESIGN.md, "verdict, in three facets"). A check looks at one layer and
 * returns a fact about one facet (structure, role or shape) with its reasons, or undefined when it does not apply. A
 * facet's state is the worst of its facts (fails > guarded > ok); a new rule of thumb is one check and one test.
 */
import type { FacetState, Layer, LayerFacets } from './ir';
import type { Evaluator } from './dims';
import type { LayerRec } from './layers';

export type FacetName = 'structure' | 'role' | 'shape';

export interface Fact {
  state: FacetState;
  /** Full sentences, in the order the layer's reasons list them. */
  reasons: string[];
  /** This fact makes earlier "can become te.*" sentences of the facet untrue: they are dropped. */
  overrides?: 'can-become' | 'all';
}

export interface CheckInput {
  rec: LayerRec;
  ev: Evaluator;
  L: Layer;
  /** The facet's state from the checks before this one. */
  sofar: FacetState;
}

export interface Check {
  /** Stable, kebab-case: the facet fact records it (`check`), tests name it. */
  name: string;
  facet: FacetName;
  run(input: CheckInput): Fact | undefined;
}

const RANK: Record<FacetState, number> = { ok: 0, guarded: 1, fails: 2 };

export function worse(a: FacetState, b: FacetState): FacetState {
  return RANK[b] > RANK[a] ? b : a;
}

/** A facet's outcome: its state, the check that decided it, and the reasons of all facts in order. */
export interface FacetOutcome {
  state: FacetState;
  check: string;
  reasons: string[];
  /** A fact replaced all earlier reasons of the facet: they are the whole story. */
  exclusive?: boolean;
}

const CAN_BECOME = / can become te\./;

/** Runs the checks of one facet in order; `stopAtFail` ends at the first failing fact (role: one protection is enough). */
export function runFacet(checks: readonly Check[], rec: LayerRec, ev: Evaluator, stopAtFail = false): FacetOutcome {
  const out: FacetOutcome = { state: 'ok', check: '', reasons: [] };
  // One input for all the checks of the facet (they read it, none keeps it): not one object per check and layer.
  const input: CheckInput = { rec, ev, L: rec.layer, sofar: out.state };
  for (const c of checks) {
    input.sofar = out.state;
    const f = c.run(input);
    if (!f) continue;
    if (f.overrides === 'all') { out.reasons.length = 0; out.exclusive = true; }
    else if (f.overrides === 'can-become') out.reasons = out.reasons.filter((r) => !CAN_BECOME.test(r));
    out.reasons.push(...f.reasons);
    if (RANK[f.state] > RANK[out.state] || !out.check) { out.state = worse(out.state, f.state); out.check = c.name; }
    // A failing fact that is the whole story (overrides all) ends the facet, as does any failure where asked.
    if (f.state === 'fails' && (stopAtFail || f.overrides === 'all')) break;
  }
  return out;
}

/** The IR form of a facet outcome (one reason string). */
export function facetFact(o: FacetOutcome, fallbackReason: string): LayerFacets['structure'] {
  return { state: o.state, reason: o.reasons.join(' ') || fallbackReason, check: o.check || 'none' };
}

/** convertible from the facets: structure ok, role not protected, shape not fails; a structure decided at run time
 *  (guarded) makes it uncertain. */
export function convertibleOf(f: LayerFacets): Layer['convertible'] {
  if (f.role.state === 'fails' || f.structure.state === 'fails' || f.shape.state === 'fails') return false;
  return f.structure.state === 'guarded' ? 'uncertain' : true;
}
