import { describe, expect, test } from "vitest";
import { layoutInput } from "../src/layout-client";
import {
  LayoutEngine,
  layoutSteps,
  ROW_WIDTH,
  type LayoutStepInput,
  type StepLayout,
} from "../src/layout";
import { fixture } from "./helpers";

function cells(l: StepLayout): Map<string, [number, number]> {
  return new Map(l.ids.map((id, i) => [id, [l.layer[i]!, l.col[i]!]]));
}

const chain = (ids: string[]): [string, string][] => ids.slice(1).map((id, i) => [ids[i]!, id]);

describe("layered layout", () => {
  test("follows trace order: a node sits below its producers", () => {
    const step: LayoutStepInput = {
      inputs: ["input:a", "input:b"],
      nodes: [
        { id: "n1", lineage: [] },
        { id: "n2", lineage: [] },
        { id: "n3", lineage: [] },
      ],
      edges: [
        ["input:a", "n1"],
        ["input:b", "n2"],
        ["n1", "n3"],
        ["n2", "n3"],
        ["n3", "output"],
      ],
    };
    const c = cells(new LayoutEngine().layoutStep(step));
    expect(c.get("input:a")![0]).toBe(0);
    expect(c.get("n1")![0]).toBe(1);
    expect(c.get("n3")![0]).toBe(2);
    expect(c.get("output")![0]).toBe(3);
    const occupied = [...c.values()].map(([l, k]) => `${l},${k}`);
    expect(new Set(occupied).size).toBe(occupied.length);
  });

  test("a row holds at most ROW_WIDTH new nodes; the rest wrap below, in trace order (Note [Rows that wrap])", () => {
    // A prologue: hundreds of checks of values unpacked from one input stood in one row 43,000 px wide.
    const checks = Array.from({ length: 200 }, (_, i) => `c${i}`);
    const step: LayoutStepInput = {
      inputs: ["input:args"],
      nodes: [{ id: "u", lineage: [] }, ...checks.map((id) => ({ id, lineage: [] }))],
      edges: [["input:args", "u"], ...checks.map((id): [string, string] => ["u", id])],
    };
    const c = cells(new LayoutEngine().layoutStep(step));
    const perLayer = new Map<number, number>();
    for (const id of checks) perLayer.set(c.get(id)![0], (perLayer.get(c.get(id)![0]) ?? 0) + 1);
    expect(Math.max(...perLayer.values())).toBeLessThanOrEqual(ROW_WIDTH);
    const layers = checks.map((id) => c.get(id)![0]);
    expect(layers.every((l, i) => l > c.get("u")![0] && (i === 0 || l >= layers[i - 1]!))).toBe(
      true,
    );
    const occupied = [...c.values()].map(([l, k]) => `${l},${k}`);
    expect(new Set(occupied).size).toBe(occupied.length);
  });

  test("a source that nothing reads stands below the node before it, not on the top row", () => {
    // ResNet's batch norms each end with `num_batches_tracked += 1` (reads a buffer only, read by
    // nothing): on the top row, each stretched its module's box over the whole graph
    const step: LayoutStepInput = {
      inputs: ["input:x", "input:count"],
      nodes: ["n1", "n2", "n3", "bump", "n4"].map((id) => ({ id, lineage: [] })),
      edges: [...chain(["input:x", "n1", "n2", "n3", "n4", "output"]), ["input:count", "bump"]],
    };
    const [c] = layoutSteps([step]).map(cells);
    const [n3Layer, n3Col] = c!.get("n3")!;
    expect(c!.get("bump")).toEqual([n3Layer + 1, n3Col + 1]); // beside n4, which follows it
    expect(c!.get("input:count")).toEqual([n3Layer, n3Col + 1]); // its input right above it
    const occupied = [...c!.values()].map(([l, k]) => `${l},${k}`);
    expect(new Set(occupied).size).toBe(occupied.length);
  });

  test("a node surviving from step A to step B keeps its coordinates", () => {
    const a: LayoutStepInput = {
      inputs: ["input:x"],
      nodes: ["n1", "n2", "n3", "n4"].map((id) => ({ id, lineage: [] })),
      edges: chain(["input:x", "n1", "n2", "n3", "n4", "output"]),
    };
    // B removes n2 (n3 now reads n1), adds n9 in front of everything, and a new n5 after n4.
    const b: LayoutStepInput = {
      inputs: ["input:x"],
      nodes: ["n9", "n1", "n3", "n4", "n5"].map((id) => ({ id, lineage: [] })),
      edges: [
        ["input:x", "n9"],
        ["n9", "n1"],
        ["n1", "n3"],
        ["n3", "n4"],
        ["n4", "n5"],
        ["n5", "output"],
      ],
    };
    const [la, lb] = layoutSteps([a, b]).map(cells);
    for (const id of ["input:x", "n1", "n3", "n4"]) expect(lb!.get(id), id).toEqual(la!.get(id));
    const occupied = [...lb!.values()].map(([l, k]) => `${l},${k}`);
    expect(new Set(occupied).size).toBe(occupied.length);
  });

  test("a fusion takes the place of the first op it absorbed", () => {
    const a: LayoutStepInput = {
      inputs: ["input:x"],
      nodes: ["n1", "n2", "n3"].map((id) => ({ id, lineage: [] })),
      edges: chain(["input:x", "n1", "n2", "n3", "output"]),
    };
    const b: LayoutStepInput = {
      inputs: ["input:x"],
      nodes: [
        { id: "f1", lineage: ["n1", "n2"] },
        { id: "n3", lineage: ["n3"] },
      ],
      edges: [
        ["input:x", "f1"],
        ["f1", "n3"],
        ["n3", "output"],
      ],
    };
    const [la, lb] = layoutSteps([a, b]).map(cells);
    expect(lb!.get("f1")).toEqual(la!.get("n1"));
    expect(lb!.get("n3")).toEqual(la!.get("n3"));
  });

  test("a fusion node shares its first member's cell; members keep theirs", () => {
    const a: LayoutStepInput = {
      inputs: ["input:x"],
      nodes: ["n1", "n2", "n3"].map((id) => ({ id, lineage: [] })),
      edges: chain(["input:x", "n1", "n2", "n3", "output"]),
    };
    const b: LayoutStepInput = {
      inputs: ["input:x"],
      nodes: [
        { id: "f", lineage: ["n1", "n2"] },
        { id: "n1", lineage: ["n1"], fusedInto: "f" },
        { id: "n2", lineage: ["n2"], fusedInto: "f" },
        { id: "n3", lineage: ["n3"] },
      ],
      edges: [
        ["input:x", "f"],
        ["f", "n3"],
        ["input:x", "n1"],
        ["n1", "n2"],
        ["n2", "n3"],
        ["n3", "output"],
      ],
    };
    const [la, lb] = layoutSteps([a, b]).map(cells);
    for (const id of ["n1", "n2", "n3"]) expect(lb!.get(id), id).toEqual(la!.get(id));
    expect(lb!.get("f")).toEqual(la!.get("n1"));
  });

  test("in the sample, every node that survives a pass keeps its cell", () => {
    const doc = fixture("sample");
    const layouts = layoutSteps(doc.steps.map(layoutInput)).map(cells);
    for (let i = 1; i < doc.steps.length; i++) {
      const prev = new Set(doc.steps[i - 1]!.nodes.map((n) => n.id));
      for (const n of doc.steps[i]!.nodes) {
        if (prev.has(n.id))
          expect(layouts[i]!.get(n.id), `${n.id} in step ${i}`).toEqual(layouts[i - 1]!.get(n.id));
      }
    }
    // the fusion replaces mul, sin, add where mul stood
    expect(layouts[3]!.get("n7")).toEqual(layouts[2]!.get("n1"));
  });

  test("is deterministic", () => {
    const doc = fixture("sample");
    const one = layoutSteps(doc.steps.map(layoutInput));
    const two = layoutSteps(doc.steps.map(layoutInput));
    expect(two).toEqual(one);
  });

  test("lays out 5,000 nodes quickly", () => {
    const n = 5000;
    const nodes = Array.from({ length: n }, (_, i) => ({ id: `n${i}`, lineage: [] }));
    const edges: [string, string][] = [];
    for (let i = 1; i < n; i++) {
      edges.push([`n${i - 1}`, `n${i}`]);
      if (i > 7) edges.push([`n${i - 7}`, `n${i}`]);
    }
    const t0 = performance.now();
    const l = new LayoutEngine().layoutStep({ inputs: [], nodes, edges });
    expect(l.ids).toHaveLength(n + 1);
    expect(performance.now() - t0).toBeLessThan(500);
  });
});
