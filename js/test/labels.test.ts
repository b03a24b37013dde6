import { describe, expect, test } from "vitest";
import { groupLabelFull, groupLabelText, LABEL_X } from "../src/graph-scene";
import type { Group } from "../src/schema";
import { click, fixture, mountDoc } from "./helpers";

// What a box says when it is too narrow for its whole label, and counts of one.

const CHAR_W = 7; // LABEL_CHAR_W: a width of `n` characters holds `n`

function group(kind: Group["kind"], label: string, nodes: number): Group {
  const ids = Array.from({ length: nodes }, (_, i) => `n${i}`);
  return { id: "g1", kind, label, nodes: ids, parent: null, collapsed: false, node: null };
}

describe("group labels", () => {
  test("a narrow module box keeps its measured time whole and cuts its path's start", () => {
    const g = group("module", "model.layers.0.self_attn.q_proj", 3);
    const note = "1.25 ms · eager 800.0 µs";
    const width = LABEL_X + 40 * CHAR_W;
    const text = groupLabelText(g, false, width, note);
    expect(text.length).toBeLessThanOrEqual(40);
    expect(text.endsWith(` · ${note}`)).toBe(true);
    expect(text).toContain("q_proj"); // the path's end says most
    expect(groupLabelFull(g, false, note)).toBe(
      `model.layers.0.self_attn.q_proj (module) · ${note}`,
    );
  });

  test("a wide box shows the whole label", () => {
    const g = group("module", "fc1", 3);
    expect(groupLabelText(g, false, 1000, "2.00 ms")).toBe("fc1 (module) · 2.00 ms");
  });

  test("a collapsed fusion of one op and a step of one op say op, not ops", () => {
    expect(groupLabelText(group("fusion", "TorchCompile0", 2), true, 1000)).toBe("fusion · 1 op");
    expect(groupLabelText(group("fusion", "TorchCompile0", 3), true, 1000)).toBe("fusion · 2 ops");
  });
});

test("a narrow box without a note keeps its path's end too", () => {
  const g = group("module", "bert.embeddings.position_embeddings", 3);
  const text = groupLabelText(g, false, LABEL_X + 20 * CHAR_W);
  expect(text.length).toBeLessThanOrEqual(20);
  expect(text.startsWith("…") && text.endsWith("position_embeddings")).toBe(true);
});

test("a symbolic size is drawn by its name, not left out", () => {
  // A decoding entry's KV cache: its length is symbolic, so the value has no `shape`, only its printed type;
  // the boxes drew `t0: f32`, as if the tensor had no shape.
  const doc = fixture("sample");
  const step = doc.steps[1]!;
  const type = "cpu f32[(k_2 + 1), 8]";
  step.nodes.find((n) => n.id === "n1")!.outputs[0] = {
    ...tensorRef("t0"),
    shape: null,
    repr: type,
  };
  step.inputs[0] = { ...step.inputs[0]!, shape: null, repr: "cpu f32[k_2, 8]" };
  const m = mountDoc(doc);
  try {
    click(m.q("[data-testid='step'][data-step-index='1']"));
    const sub = m.q("[data-testid='node'][data-node-id='n1'] .node-sub").textContent;
    expect(sub).toContain("f32[(k_2");
    expect(m.q("[data-testid='io'][data-io-id='input:x']").textContent).toContain("k_2");
  } finally {
    m.cleanup();
  }
});

function tensorRef(name: string) {
  return { name, shape: [4, 8], dtype: "f32", device: "cpu", kind: "tensor" as const };
}
