import { afterEach, describe, expect, test } from "vitest";
import { commKind, overlaps } from "../src/collectives";
import type { Step } from "../src/schema";
import { click, fixture, mountDoc, type Mounted } from "./helpers";

// fsdp-zero3.json: thunder_viz's document of a ZeRO-3 fsdp Linear-LayerNorm-Linear (1-process gloo
// group, LAYER buckets) after a backward. Its last forward step issues three all_gathers (one per
// layer), each waited for before its layer runs; the second one's wait comes after TorchCompile0
// (the first layer), so that layer's compute overlaps it.

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

function lastForward(): Step {
  return fixture("fsdp-zero3")
    .steps.filter((s) => s.kind === "computation")
    .pop()!;
}

function byOp(step: Step, op: string): string[] {
  return step.nodes.filter((n) => n.fused_into === null && n.op === op).map((n) => n.id);
}

describe("collectives", () => {
  test("distributed ops are told apart: collectives, waits, the packing around them", () => {
    expect(commKind({ op: "dist_all_gather" })).toBe("collective");
    expect(commKind({ op: "dist.reduce_scatter" })).toBe("collective");
    expect(commKind({ op: "dist_wait" })).toBe("wait");
    expect(commKind({ op: "dist_pack_bucket" })).toBe("comm");
    expect(commKind({ op: "ltorch.add" })).toBeNull();
    expect(commKind({ op: "distance" })).toBeNull();
  });

  test("each collective is paired with the wait reading its result, with the compute between", () => {
    const step = lastForward();
    const gathers = byOp(step, "dist_all_gather");
    const waits = byOp(step, "dist_wait");
    expect(gathers).toHaveLength(3);
    const o = overlaps(step);
    for (const g of gathers) {
      const pair = o.get(g)!;
      expect(waits).toContain(pair.wait);
      const c = step.nodes.find((n) => n.id === g)!;
      const w = step.nodes.find((n) => n.id === pair.wait)!;
      expect(w.inputs.map((v) => v.name)).toEqual(c.outputs.map((v) => v.name));
      expect(o.get(pair.wait!)).toBe(pair);
    }
    const [first, second] = gathers.map((g) => o.get(g)!);
    expect(first!.compute).toEqual([]); // waited for before anything computes
    const fusion = byOp(step, "TorchCompile0");
    expect(second!.compute).toEqual(fusion);
  });

  test("collectives and waits are their own kind of node; selecting one marks what overlaps it", () => {
    const doc = fixture("fsdp-zero3");
    const step = lastForward();
    m = mountDoc(doc);
    click(m.q(`[data-testid='step'][data-step-index='${step.index}']`));
    const gathers = byOp(step, "dist_all_gather");
    for (const g of gathers)
      expect(m.q(`[data-node-id='${g}']`).classList.contains("comm-collective")).toBe(true);
    for (const w of byOp(step, "dist_wait"))
      expect(m.q(`[data-node-id='${w}']`).classList.contains("comm-wait")).toBe(true);
    const pair = overlaps(step).get(gathers[1]!)!;
    click(m.q(`[data-testid='node'][data-node-id='${gathers[1]}']`));
    const marked = m
      .all("[data-testid='node'].search-match")
      .map((n) => n.getAttribute("data-node-id"))
      .sort();
    expect(marked).toEqual([pair.collective, pair.wait, ...pair.compute].sort());
    const details = m.q("[data-testid='overlap']").textContent ?? "";
    expect(details).toContain("1 op run before its wait");
    // the wait selects the same; another node clears the marks
    click(m.q(`[data-testid='node'][data-node-id='${pair.wait}']`));
    expect(m.all("[data-testid='node'].search-match")).toHaveLength(marked.length);
    click(m.q(`[data-testid='node'][data-node-id='${pair.compute[0]}']`));
    expect(m.all("[data-testid='node'].search-match")).toHaveLength(0);
    expect(m.all("[data-testid='overlap']")).toHaveLength(0);
  });
});
