import { afterEach, describe, expect, test } from "vitest";
import { plumbingCount, withoutPlumbing } from "../src/plumbing";
import type { TraceDocument } from "../src/schema";
import { click, fixture, mountDoc, type Mounted } from "./helpers";

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

/** The sample with transformers' output collector in steps 1 and 2: an opaque input that only an
 * attribute store reads, as GPT-2's `_active_collector` and `store_attr(..., 'compiling', True)`. */
function withCollector(): TraceDocument {
  const doc = fixture("sample");
  for (const step of doc.steps.slice(1, 3)) {
    const like = step.nodes[0]!;
    const collector = {
      name: "_active_collector",
      shape: null,
      dtype: null,
      device: null,
      kind: "other" as const,
    };
    step.inputs.push(collector);
    step.nodes.push({
      ...like,
      id: "nstore",
      uid: 9999,
      op: "prims.store_attr",
      label: "store_attr",
      inputs: [collector],
      outputs: [],
      group: null,
      fused_into: null,
      lineage: [],
      origin: [],
      line: null,
    });
    step.edges.push({
      id: "estore",
      source: "input:_active_collector",
      target: "nstore",
      value: "_active_collector",
      shape: null,
      dtype: null,
    });
  }
  return doc;
}

describe("library bookkeeping", () => {
  test("is folded away by default, with a toggle that shows it", () => {
    m = mountDoc(withCollector());
    click(m.q("[data-testid='step'][data-step-index='1']"));
    const toggle = m.q<HTMLInputElement>("[data-testid='show-plumbing']");
    expect(toggle.closest("label")!.hidden).toBe(false);
    expect(toggle.closest("label")!.textContent).toContain("(1)");
    expect(m.all("[data-node-id='nstore']")).toHaveLength(0);
    expect(m.all("[data-io-id='input:_active_collector']")).toHaveLength(0);
    const nodes = m.all("[data-testid='node']").length;
    toggle.checked = true;
    toggle.dispatchEvent(new Event("change", { bubbles: true }));
    expect(m.all("[data-node-id='nstore']")).toHaveLength(1);
    expect(m.all("[data-io-id='input:_active_collector']")).toHaveLength(1);
    expect(m.all("[data-testid='node']").length).toBe(nodes + 1);
    expect(m.q<HTMLElement>("[data-testid='step'][aria-selected='true']").dataset.stepIndex).toBe(
      "1",
    );
  });

  test("a document without any has no toggle and is left as it is", () => {
    const doc = fixture("sample");
    expect(plumbingCount(doc)).toBe(0);
    expect(withoutPlumbing(doc).steps).toEqual(doc.steps);
    m = mountDoc(doc);
    expect(m.q<HTMLInputElement>("[data-testid='show-plumbing']").closest("label")!.hidden).toBe(
      true,
    );
  });

  test("an opaque input that computation also reads stays", () => {
    const doc = withCollector();
    const step = doc.steps[1]!;
    step.edges.push({ ...step.edges.at(-1)!, id: "e2", target: step.nodes[0]!.id });
    const shown = withoutPlumbing(doc).steps[1]!;
    expect(shown.nodes.map((n) => n.id)).not.toContain("nstore");
    expect(shown.inputs.map((v) => v.name)).toContain("_active_collector");
  });
});
