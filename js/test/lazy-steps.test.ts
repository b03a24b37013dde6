import { afterEach, describe, expect, test, vi } from "vitest";
import { isLoaded } from "../src/lazy";
import { StepLayouts } from "../src/layout-client";
import { readDocument, validateDocument, type Step } from "../src/schema";
import { click, fixture, mountDoc, type Mounted } from "./helpers";

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
  vi.useRealTimers();
});

/** `doc` whose steps record, in `reads`, the index of each step whose nodes are read (in `order`,
 * in the order of their first reads). */
function watched(name: "sample" | "backward-gelu"): {
  doc: unknown;
  reads: Set<number>;
  order: number[];
} {
  const doc = fixture(name);
  const reads = new Set<number>();
  const order: number[] = [];
  doc.steps.forEach((step, i) => {
    const nodes = step.nodes;
    Object.defineProperty(step, "nodes", {
      get: () => {
        if (!reads.has(i)) order.push(i);
        reads.add(i);
        return nodes;
      },
      enumerable: true,
    });
  });
  return { doc, reads, order };
}

describe("steps are read on first use (Note [Lazy steps])", () => {
  test("readDocument checks the heads now and a step's body when it is first read", () => {
    const { doc, reads } = watched("sample");
    const result = readDocument(doc);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(reads.size).toBe(0);
    expect(result.doc.steps.map((s) => s.pass)).toEqual(fixture("sample").steps.map((s) => s.pass));
    const step = result.doc.steps[2]!;
    expect(isLoaded(step, "nodes")).toBe(false);
    expect(step.nodes.map((n) => n.id)).toEqual(fixture("sample").steps[2]!.nodes.map((n) => n.id));
    expect([...reads]).toEqual([2]);
    expect(isLoaded(step, "edges")).toBe(true); // the whole body at once
    expect(step.problems).toEqual([]);
    expect(validateDocument(doc).ok).toBe(true);
    expect(reads.size).toBe(4);
  });

  test("a step whose body fails its check is empty, says why, and leaves the others readable", () => {
    const doc = fixture("sample") as unknown as { steps: { nodes: Record<string, unknown>[] }[] };
    doc.steps[2]!.nodes[1]!.op = 7;
    const result = readDocument(doc);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const [, s1, s2] = result.doc.steps as [Step, Step, Step];
    expect(s1.nodes.length).toBeGreaterThan(0);
    expect(s2.nodes).toEqual([]);
    expect(s2.problems).toEqual(["steps[2].nodes[1].op: expected a string, got number 7"]);
  });

  test("the explorer shows such a step's problems in place of its graph", () => {
    const doc = fixture("sample") as unknown as { steps: { nodes: Record<string, unknown>[] }[] };
    doc.steps[2]!.nodes[1]!.op = 7;
    m = mountDoc(doc);
    expect(m.all("[data-testid='node']").length).toBeGreaterThan(0); // step 1 opens fine
    click(m.q("[data-testid='step'][data-step-index='2']"));
    const error = m.q("[data-testid='error']");
    expect(error.textContent).toContain("This step cannot be shown");
    expect(error.textContent).toContain("steps[2].nodes[1].op: expected a string");
    expect(m.all("[data-testid='node']")).toHaveLength(0);
    click(m.q("[data-testid='step'][data-step-index='3']"));
    expect(m.all("[data-testid='error']")).toHaveLength(0);
    expect(m.all("[data-testid='node']").length).toBeGreaterThan(0);
  });

  test("the first render reads the step it shows; the others are read while idle", () => {
    vi.useFakeTimers();
    const { doc, reads } = watched("sample");
    m = mountDoc(doc);
    expect(m.root.dataset.stepIndex).toBe("1");
    expect([...reads]).toEqual([1]);
    const meta = (i: number): string =>
      m!.q(`[data-testid='step'][data-step-index='${i}'] .tx-step-meta`).textContent ?? "";
    expect(meta(1)).toMatch(/computation · \d+ ops/);
    expect(meta(3)).not.toMatch(/ops/);
    vi.runAllTimers();
    expect(reads.size).toBe(4);
    for (const i of [0, 2, 3]) expect(meta(i)).toMatch(/ · \d+ ops · /);
    expect(m.q(`[data-testid='step'][data-step-index='3'] .tx-step-diff`).textContent).toMatch(
      /^\+\d+ −\d+/,
    );
  });

  test("read ahead: the shown kind's steps first, then the others, the prologue's last", () => {
    vi.useFakeTimers();
    const { doc, order } = watched("backward-gelu");
    m = mountDoc(doc);
    expect(m.root.dataset.stepIndex).toBe("2");
    vi.runAllTimers();
    expect(order).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1]);
  });

  test("showing a step lists the ops of the earlier steps of its kind it read", () => {
    vi.useFakeTimers();
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='3']"));
    const meta = (i: number): string =>
      m!.q(`[data-testid='step'][data-step-index='${i}'] .tx-step-meta`).textContent ?? "";
    for (const i of [1, 2, 3]) expect(meta(i)).toMatch(/ · \d+ ops · /);
  });

  test("a step's cells do not depend on the steps of other kinds", () => {
    const result = readDocument(fixture("backward-gelu"));
    if (!result.ok) throw new Error("fixture");
    const steps = result.doc.steps;
    const last = steps.length - 1;
    const alone = new StepLayouts(steps).get(last);
    // laying out the backward step first reads no forward step
    expect(steps.filter((s) => s.kind !== "backward").some((s) => isLoaded(s, "nodes"))).toBe(
      false,
    );
    const walked = new StepLayouts(steps);
    for (let i = 0; i <= last; i++) walked.get(i);
    expect(walked.get(last)).toEqual(alone);
  });
});
